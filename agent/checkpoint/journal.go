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
// the directory) costs two syncs and a rename per pod ADD and DEL, and
// appending the whole state costs encoding, checksumming and writing every
// record of the node for a change of one or two. Instead the file is a
// journal: each line is one record, an envelope (version, SHA-256 of the
// body, time written, body). The first record holds a whole state
// (version 1, exactly as a rewrite writes it); each later one holds a
// change to the state before it (version ChangeVersion, change.go): the
// records that differ, by key, and the keys gone. A change appends one
// record and syncs the file once (fdatasync). When the file holds
// compactRecords records or compactBytes bytes, the next change rewrites
// it whole (atomically, as before), leaving one record; so does the first
// change of every process, which also drops anything a crash left after
// the last whole record.
//
// Reading it back (decodeJournal): the first record's state, each change
// after it replayed in order, and the result checked (State.Validate).
//
//   - The first record was written by a rewrite, whole or not at all, so
//     if it can't be trusted the file is corrupt: Load fails with
//     ErrCorrupt (or ErrUnsupportedVersion, ErrInvalid) and leaves the file
//     as it is, as it always did. So does a first record that is a change.
//   - A record is committed once its sync has returned, and records are
//     appended one at a time, each after the previous one's sync. So only
//     the last append can be torn (a crash while it was written): trailing
//     bytes that don't form a whole record, after which nothing whole
//     follows, are that append. They are dropped, with a warning; every
//     record before them is whole and kept.
//   - A damaged record followed by a whole one is not a torn append: it is
//     corruption, and Load fails with ErrCorrupt. So is a whole change that
//     contradicts the state before it (it removes a record the state does
//     not hold), and a replayed state that fails its check is ErrInvalid.
//
// A file rewritten whole is one record with a trailing newline; a file
// written before the journal existed is one record without one. Both read
// the same. An agent from before the journal reads a file with more than
// one record as corrupt, and one from before change records refuses a
// file holding one (ErrUnsupportedVersion); both leave the file alone.

// When the next change rewrites the file instead of appending to it. A
// change record is small, so the count decides; a rewrite costs the whole
// state's encoding and two syncs.
const (
	compactRecords = 256
	compactBytes   = 8 << 20
)

// tornTail describes what decodeJournal dropped.
type tornTail struct {
	record int // the index of the first record dropped
	bytes  int
	err    error
}

// decodeJournal returns the state the journal holds and what it dropped
// after its last whole record, if anything.
func decodeJournal(b []byte) (State, *tornTail, error) {
	lines := bytes.Split(b, []byte{'\n'})
	if len(lines) > 1 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the last record's newline
	}
	first, err := decode(lines[0])
	if err != nil {
		return State{}, nil, err
	}
	if first.state == nil {
		return State{}, nil, fmt.Errorf("%w: the first record is a change, not a whole state", ErrCorrupt)
	}
	s := *first.state
	sortByKey(&s)
	var torn *tornTail
	for i, line := range lines[1:] {
		rec, err := decode(line)
		switch {
		case err == nil && torn != nil:
			return State{}, nil, fmt.Errorf("record %d: %w; record %d after it is whole, so it is not a torn write",
				torn.record, torn.err, i+1)
		case err == nil:
			if err := replay(&s, rec); err != nil {
				return State{}, nil, fmt.Errorf("record %d: %w", i+1, err)
			}
		case !errors.Is(err, ErrCorrupt):
			return State{}, nil, fmt.Errorf("record %d: %w", i+1, err)
		case torn == nil:
			torn = &tornTail{record: i + 1, bytes: len(line), err: err}
		default:
			torn.bytes += 1 + len(line)
		}
	}
	if err := s.Validate(); err != nil {
		return State{}, nil, fmt.Errorf("the state after %d records: %w", len(lines), err)
	}
	return s, torn, nil
}

// replay makes rec the state's next record.
func replay(s *State, rec record) error {
	if rec.state != nil {
		*s = *rec.state
		sortByKey(s)
		return nil
	}
	if err := s.apply(*rec.change); err != nil {
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return nil
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

// Close rewrites the file whole when it holds changes after its whole
// record, so a stopped agent leaves one record of the whole state, the
// format every agent version reads (an agent rolled back to a version from
// before change records, or before the journal, then starts on it), and
// closes the append handle. A later Save reopens the file by rewriting it
// whole. If the rewrite fails the file is as it was, every record intact.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.app != nil && f.records > 1 {
		rec, err := f.encodeLocked(Version, f.cur)
		if err == nil {
			err = f.rewriteLocked(rec)
		}
		if err != nil {
			f.closeLocked()
			return fmt.Errorf("close checkpoint %s: rewrite whole: %w", f.path, err)
		}
	}
	f.closeLocked()
	return nil
}
