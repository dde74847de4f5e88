package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// saveSeqs saves sample states with UsageSeq 1..n and returns the last.
func saveSeqs(t *testing.T, f *File, n int) State {
	t.Helper()
	var s State
	for i := 1; i <= n; i++ {
		s = sample()
		s.UsageSeq = uint64(i)
		if err := f.Save(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func records(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := bytes.SplitAfter(b, []byte("\n"))
	if len(recs[len(recs)-1]) == 0 {
		recs = recs[:len(recs)-1]
	}
	return recs
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// After the first Save rewrote the file, changes are appended to it (no
// new file, no rename), until it holds enough records to be rewritten
// whole again; the last record is always the state Load returns.
func TestSavesAppendThenCompact(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	saveSeqs(t, f, 1)
	ino := inode(t, f.Path())
	want := saveSeqs(t, f, 5)
	if got := inode(t, f.Path()); got != ino {
		t.Fatal("an append replaced the file")
	}
	if n := len(records(t, f.Path())); n != 6 {
		t.Fatalf("file holds %d records, want 6", n)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load: %+v %v", got, err)
	}
	want = saveSeqs(t, f, compactRecords+3)
	if n := len(records(t, f.Path())); n > compactRecords {
		t.Fatalf("file holds %d records, want at most %d", n, compactRecords)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after compaction: %+v %v", got, err)
	}
}

// A torn last record (a crash while it was appended) is dropped with a
// warning: every record before it is kept, the file is not touched by Load,
// and the next process's first Save rewrites it whole.
func TestTornLastRecordDropped(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail func(rec []byte) []byte
	}{
		{"half a record", func(rec []byte) []byte { return rec[:len(rec)/2] }},
		{"all but its newline, one byte changed", func(rec []byte) []byte {
			b := bytes.Clone(rec[:len(rec)-1])
			b[len(b)/2] ^= 1
			return b
		}},
		{"zeros", func([]byte) []byte { return make([]byte, 4096) }},
		{"two damaged lines", func(rec []byte) []byte {
			return append(append(bytes.Clone(rec[:len(rec)/3]), '\n'), rec[:len(rec)/4]...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(filepath.Join(t.TempDir(), "state.json"))
			want := saveSeqs(t, f, 3)
			recs := records(t, f.Path())
			torn := append(bytes.Join(recs, nil), tc.tail(recs[len(recs)-1])...)
			if err := os.WriteFile(f.Path(), torn, 0o600); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			g := New(f.Path()).WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
			got, err := g.Load()
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("load with a torn tail: %+v %v", got, err)
			}
			if !strings.Contains(logs.String(), "torn record") || !strings.Contains(logs.String(), "record=3 ") {
				t.Errorf("no clear warning of the dropped record: %q", logs.String())
			}
			if after, _ := os.ReadFile(f.Path()); !bytes.Equal(after, torn) {
				t.Fatal("Load changed the file")
			}
			next := saveSeqs(t, g, 1)
			if n := len(records(t, f.Path())); n != 1 {
				t.Fatalf("first Save after a torn tail left %d records, want 1", n)
			}
			if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, next) {
				t.Fatalf("load after the rewrite: %+v %v", got, err)
			}
		})
	}
}

// Damage that is not a torn append — a bad record with a whole one after
// it, or a bad first record — is corruption: a clear error, and the file
// left as it is.
func TestDamagedJournalIsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage int // which record
	}{{"middle record", 1}, {"first record", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			f := New(filepath.Join(t.TempDir(), "state.json"))
			saveSeqs(t, f, 4)
			recs := records(t, f.Path())
			recs[tc.damage] = bytes.Replace(recs[tc.damage], []byte(`"usageSeq":`), []byte(`"usageSeq":9`), 1)
			content := bytes.Join(recs, nil)
			if err := os.WriteFile(f.Path(), content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(f.Path()).Load()
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), f.Path()) {
				t.Fatalf("err = %v, want ErrCorrupt naming the file", err)
			}
			if after, _ := os.ReadFile(f.Path()); !bytes.Equal(after, content) {
				t.Fatal("Load changed the file")
			}
		})
	}
}

// A file written before the journal (one record, no newline) loads, and
// the next Save rewrites it in the journal's form.
func TestSingleRecordFileWithoutNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	want := sample()
	old := rewrap(t, Version, string(mustJSON(t, want)))
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	f := New(path)
	if got, err := f.Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load: %+v %v", got, err)
	}
	next := saveSeqs(t, f, 2)
	if got, err := New(path).Load(); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("load after saves: %+v %v", got, err)
	}
}

// A Save whose append fails is not found by a later Load, and the Save
// after it rewrites the file.
func TestFailedAppendNotCommitted(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	want := saveSeqs(t, f, 2)
	_ = f.app.Close() // the append handle breaks underneath
	bad := sample()
	bad.UsageSeq = 99
	if err := f.Save(bad); err == nil {
		t.Fatal("Save succeeded on a broken file")
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after a failed Save: %+v %v", got, err)
	}
	next := saveSeqs(t, f, 1)
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, next) {
		t.Fatalf("load after the next Save: %+v %v", got, err)
	}
}

func mustJSON(t *testing.T, s State) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Close leaves one whole record of the last state: the file an agent from
// before change records (or before the journal) reads. A Save after Close
// starts again with a whole record.
func TestCloseRewritesWhole(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "state.json"))
	want := saveSeqs(t, f, 4)
	if n := len(records(t, f.Path())); n != 4 {
		t.Fatalf("file holds %d records before Close, want 4", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	recs := records(t, f.Path())
	if len(recs) != 1 {
		t.Fatalf("file holds %d records after Close, want 1", len(recs))
	}
	var env envelope
	if err := json.Unmarshal(recs[0], &env); err != nil {
		t.Fatal(err)
	}
	if env.Version != Version || env.State == nil || env.Change != nil {
		t.Fatalf("record after Close: version %d, state %t, change %t; want a whole state of version %d",
			env.Version, env.State != nil, env.Change != nil, Version)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after Close: %+v %v", got, err)
	}
	// Closing again, or a file of one record, leaves it alone.
	ino := inode(t, f.Path())
	if err := f.Close(); err != nil || inode(t, f.Path()) != ino {
		t.Fatalf("second Close: %v, file replaced: %t", err, inode(t, f.Path()) != ino)
	}
	want = saveSeqs(t, f, 2)
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after a Save past Close: %+v %v", got, err)
	}
}
