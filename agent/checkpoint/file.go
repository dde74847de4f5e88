package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors Load reports. Each leaves the file where it is.
var (
	// ErrNotFound means there is no checkpoint file: a first start.
	ErrNotFound = errors.New("no checkpoint file")
	// ErrCorrupt means the file is truncated, not JSON, or fails its
	// checksum.
	ErrCorrupt = errors.New("checkpoint file is corrupt")
	// ErrUnsupportedVersion means the file was written by a format this
	// agent doesn't know (a downgrade, or a newer agent's file).
	ErrUnsupportedVersion = errors.New("checkpoint file has an unsupported version")
)

// envelope is the file's outer shape. The checksum covers State's JSON, so a
// file that still parses after a torn or corrupted write is caught too.
type envelope struct {
	Version int             `json:"version"`
	SHA256  string          `json:"sha256"`
	Written time.Time       `json:"written"`
	State   json.RawMessage `json:"state,omitempty"`
	Change  json.RawMessage `json:"change,omitempty"`
}

// File is a checkpoint at one path. It is safe for concurrent use; Saves are
// serialised.
type File struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	// cleaned records that stale temp files were removed once.
	cleaned bool
	// The journal (journal.go): the file open for appending, its
	// committed length and how many records it holds. app is nil until
	// the first Save, which rewrites the file whole.
	app     *os.File
	size    int64
	records int
	// cur is the state the file holds, in key order, once a Save has
	// written it; a change is recorded against it. next, chg, body and out
	// are a Save's working copies, kept so that saves reuse them: the
	// agent saves on every pod ADD and DEL.
	cur, next State
	chg       change
	check     validator
	body      bytes.Buffer
	out       []byte
}

// New returns the checkpoint at path. Nothing is read or written until Load
// or Save.
func New(path string) *File { return &File{path: path, log: slog.New(slog.DiscardHandler)} }

// WithLogger makes Load log what it drops (a torn last record) to l, and
// returns f.
func (f *File) WithLogger(l *slog.Logger) *File {
	f.log = l.With("component", "checkpoint")
	return f
}

// Path returns the checkpoint file's path.
func (f *File) Path() string { return f.path }

const tempInfix = ".tmp-"

// Load reads and verifies the checkpoint. It returns an error wrapping
// ErrNotFound, ErrCorrupt, ErrUnsupportedVersion or ErrInvalid when the file
// is missing or can't be trusted; in every case the file is left untouched.
// Temp files of interrupted Saves are never read.
func (f *File) Load() (State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, fmt.Errorf("load checkpoint %s: %w", f.path, ErrNotFound)
	}
	if err != nil {
		return State{}, fmt.Errorf("load checkpoint %s: %w", f.path, err)
	}
	s, torn, err := decodeJournal(b)
	if err != nil {
		return State{}, fmt.Errorf("load checkpoint %s: %w", f.path, err)
	}
	if torn != nil {
		f.log.Warn("checkpoint ends in a torn record, dropped: it was never committed (its write did not finish); "+
			"every committed record is kept", "path", f.path, "record", torn.record, "bytes", torn.bytes, "err", torn.err)
	}
	return s, nil
}

// record is one decoded record of the journal: a whole state, or a change
// to the state before it.
type record struct {
	state  *State
	change *change
}

// decode reads one record: a whole state (version 1) or a change (version
// ChangeVersion).
func decode(b []byte) (record, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return record{}, fmt.Errorf("%w: empty file", ErrCorrupt)
	}
	// Read the version alone first: a future format may not match the
	// envelope at all, and that is a version problem, not corruption.
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return record{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if v.Version == nil {
		return record{}, fmt.Errorf("%w: no version field", ErrCorrupt)
	}
	if *v.Version != Version && *v.Version != ChangeVersion {
		return record{}, fmt.Errorf("%w: version %d, this agent reads %d and %d", ErrUnsupportedVersion,
			*v.Version, Version, ChangeVersion)
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return record{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	body := env.State
	if *v.Version == ChangeVersion {
		body = env.Change
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		return record{}, fmt.Errorf("%w: body: %v", ErrCorrupt, err)
	}
	if sum := checksum(compact.Bytes()); sum != env.SHA256 {
		return record{}, fmt.Errorf("%w: checksum mismatch (file says %.12s, content is %.12s)", ErrCorrupt, env.SHA256, sum)
	}
	dec := json.NewDecoder(bytes.NewReader(compact.Bytes()))
	dec.DisallowUnknownFields()
	if *v.Version == ChangeVersion {
		c := new(change)
		if err := dec.Decode(c); err != nil {
			return record{}, fmt.Errorf("%w: change: %v", ErrCorrupt, err)
		}
		return record{change: c}, nil
	}
	s := new(State)
	if err := dec.Decode(s); err != nil {
		return record{}, fmt.Errorf("%w: state: %v", ErrCorrupt, err)
	}
	if err := s.Validate(); err != nil {
		return record{}, err
	}
	return record{state: s}, nil
}

// encodeEnvelope returns exactly what json.Marshal of the envelope would,
// body being json.Marshal's (compact) output of a whole state. json.Marshal
// would scan and compact body again as a RawMessage, which cost about as
// much as encoding the state.
func encodeEnvelope(body []byte, written time.Time) ([]byte, error) {
	return appendRecord(nil, Version, body, written)
}

// appendRecord appends a record of the given version around body (a whole
// state for Version, a change for ChangeVersion) to out, without its
// newline.
func appendRecord(out []byte, version int, body []byte, written time.Time) ([]byte, error) {
	w, err := written.MarshalJSON()
	if err != nil {
		return nil, err
	}
	field := `,"state":`
	if version == ChangeVersion {
		field = `,"change":`
	}
	out = slices.Grow(out, len(body)+len(w)+128)
	out = append(out, `{"version":`...)
	out = strconv.AppendInt(out, int64(version), 10)
	out = append(out, `,"sha256":"`...)
	out = append(out, checksum(body)...)
	out = append(out, `","written":`...)
	out = append(out, w...)
	out = append(out, field...)
	out = append(out, body...)
	return append(out, '}'), nil
}

func checksum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// encodeLocked encodes v (a State or a change) as one record of the given
// version, with its newline, into f's reused buffers.
func (f *File) encodeLocked(version int, v any) ([]byte, error) {
	f.body.Reset()
	// The encoder writes what json.Marshal returns, and a newline.
	if err := json.NewEncoder(&f.body).Encode(v); err != nil {
		return nil, err
	}
	body := bytes.TrimSuffix(f.body.Bytes(), []byte{'\n'})
	out, err := appendRecord(f.out[:0], version, body, time.Now().UTC())
	if err != nil {
		return nil, err
	}
	f.out = append(out, '\n')
	return f.out, nil
}

// Save makes s the checkpoint durably: it appends what changed since the
// last Save to the file as one record and syncs it once (journal.go). The
// first Save of a File, and every Save once the file holds enough records,
// rewrites the file whole instead, as one record of s, atomically (write a
// temp file, fsync, rename, fsync the directory). A crash at any point
// leaves every committed state readable. It refuses an inconsistent state
// rather than persist it. s is not modified nor kept.
func (f *File) Save(s State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := s.validate(&f.check); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	if !f.cleaned {
		// The first save on a new node creates the directory (0700: the
		// checkpoint is the node's only record of which pod holds what).
		if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
			return fmt.Errorf("save checkpoint %s: %w", f.path, err)
		}
		f.removeStaleTemps()
		f.cleaned = true
	}
	copyInto(&f.next, s)
	var rec []byte
	var err error
	if f.app == nil || f.records >= compactRecords || f.size >= compactBytes {
		if rec, err = f.encodeLocked(Version, f.next); err == nil {
			err = f.rewriteLocked(rec)
		}
	} else {
		diff(&f.chg, f.cur, f.next)
		if rec, err = f.encodeLocked(ChangeVersion, &f.chg); err == nil {
			err = f.appendLocked(rec)
		}
	}
	if err != nil {
		return fmt.Errorf("save checkpoint %s: %w", f.path, err)
	}
	// What the file holds now; the old one's arrays take the next copy.
	f.cur, f.next = f.next, f.cur
	return nil
}

// removeStaleTemps deletes temp files left by Saves a crash interrupted.
// They never held a committed state, so nothing is lost.
func (f *File) removeStaleTemps() {
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(f.path), globEscape(filepath.Base(f.path))+tempInfix+"*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

func writeAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+tempInfix+"*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err = tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	// The rename is only durable once the directory entry is.
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// SetAside renames the checkpoint file out of the way (to
// <path>.corrupt-<UTC time>) and returns the new name. It is for an operator
// who chose to start over after a failed Load; the old file is kept for
// inspection.
func (f *File) SetAside() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closeLocked()
	to := fmt.Sprintf("%s.corrupt-%s", f.path, time.Now().UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(f.path, to); err != nil {
		return "", fmt.Errorf("set checkpoint aside: %w", err)
	}
	if err := syncDir(filepath.Dir(f.path)); err != nil {
		return "", fmt.Errorf("set checkpoint aside: %w", err)
	}
	return to, nil
}
