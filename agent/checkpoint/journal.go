package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The journal.
//
// Rewriting the file on every change (temp file, fsync, rename, fsync of
// the directory) costs two syncs and a rename per pod ADD and DEL. Instead
// the file is a journal of whole states: each line is one record, an
// envelope exactly as a rewrite writes it (version, SHA-256 of the state,
// the state), and the last whole record is the checkpoint. A change appends
// one record and syncs the file once (fdatasync). When the file holds
// compactRecords records or compactBytes bytes, the next change rewrites
// it whole (atomically, as before), leaving one record; so does the first
// change of every process, which also drops anything a crash left after
// the last whole record.
//
// Reading it back (decodeJournal):
//
//   - The first record was written by a rewrite, whole or not at all, so
//     if it can't be trusted the file is corrupt: Load fails with
//     ErrCorrupt (or ErrUnsupportedVersion, ErrInvalid) and leaves the file
//     as it is, as it always did.
//   - A record is committed once its sync has returned, and records are
//     appended one at a time, each after the previous one's sync. So only
//     the last append can be torn (a crash while it was written): trailing
//     bytes that don't form a whole record, after which nothing whole
//     follows, are that append. They are dropped, with a warning; every
//     record before them is whole and kept.
//   - A damaged record followed by a whole one is not a torn append: it is
//     corruption, and Load fails with ErrCorrupt.
//
// A file rewritten whole is one record with a trailing newline; a file
// written before the journal existed is one record without one. Both read
// the same. An agent from before the journal reads a file with more than
// one record as corrupt (and leaves it alone).

// When the next change rewrites the file instead of appending to it.
const (
	compactRecords = 64
	compactBytes   = 8 << 20
)

// tornTail describes what decodeJournal dropped.
type tornTail struct {
	record int // the index of the first record dropped
	bytes  int
	err    error
}

// decodeJournal returns the last whole record's state and what it dropped
// after it, if anything.
func decodeJournal(b []byte) (State, *tornTail, error) {
	lines := bytes.Split(b, []byte{'\n'})
	if len(lines) > 1 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the last record's newline
	}
	s, err := decode(lines[0])
	if err != nil {
		return State{}, nil, err
	}
	var torn *tornTail
	for i, rec := range lines[1:] {
		st, err := decode(rec)
		switch {
		case err == nil && torn != nil:
			return State{}, nil, fmt.Errorf("record %d: %w; record %d after it is whole, so it is not a torn write",
				torn.record, torn.err, i+1)
		case err == nil:
			s = st
		case !errors.Is(err, ErrCorrupt):
			return State{}, nil, fmt.Errorf("record %d: %w", i+1, err)
		case torn == nil:
			torn = &tornTail{record: i + 1, bytes: len(rec), err: err}
		default:
			torn.bytes += 1 + len(rec)
		}
	}
	return s, torn, nil
}

// appendLocked appends one record and syncs it. If either fails, the file
// is cut back to its committed length, so a record whose Save failed is
// not found by a later Load; if even that fails, the next Save rewrites
// the file whole.
func (f *File) appendLocked(rec []byte) error {
	_, err := f.app.Write(rec)
	if err == nil {
		err = unix.Fdatasync(int(f.app.Fd()))
	}
	if err != nil {
		if terr := f.app.Truncate(f.size); terr != nil || unix.Fdatasync(int(f.app.Fd())) != nil {
			f.closeLocked()
		}
		return fmt.Errorf("append: %w", err)
	}
	f.size += int64(len(rec))
	f.records++
	return nil
}

// rewriteLocked replaces the file with the one record rec, atomically, and
// opens it for appending.
func (f *File) rewriteLocked(rec []byte) error {
	f.closeLocked()
	if err := writeAtomic(f.path, rec); err != nil {
		return err
	}
	// Without an append handle the next Save rewrites again; this one is
	// durable either way.
	if app, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND, 0); err == nil {
		f.app, f.size, f.records = app, int64(len(rec)), 1
	}
	return nil
}

// closeLocked closes the append handle; the next Save rewrites the file.
func (f *File) closeLocked() {
	if f.app != nil {
		_ = f.app.Close()
		f.app = nil
	}
}

// Close closes the file's append handle. A later Save reopens the file by
// rewriting it whole.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
	return nil
}
