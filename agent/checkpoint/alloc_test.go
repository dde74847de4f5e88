package checkpoint

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A Save reuses the buffers it encodes into, the copies it compares (the
// state the file holds, the state being saved) and the indexes it checks
// the state with: the agent saves on every change, and fresh copies of the
// node's state per write were a large part of the agent's garbage. What
// one Save of a 2,000-address node allocates stays under two records'
// worth of its journal (a whole state is over 200 KB).
func TestSaveReusesItsBuffers(t *testing.T) {
	f := New(filepath.Join(t.TempDir(), "ck.json"))
	const saves = 40
	for i := range saves { // the last of these is the journal's record to measure
		if err := f.Save(bigState(uint64(i+1), 2000)); err != nil {
			t.Fatal(err)
		}
	}
	states := make([]State, saves)
	for i := range states { // built before measuring: the caller's, not Save's
		states[i] = bigState(uint64(saves+i+1), 2000)
	}
	fi, err := os.Stat(f.path)
	if err != nil {
		t.Fatal(err)
	}
	record := fi.Size() / saves
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, s := range states {
		if err := f.Save(s); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perSave := int64(after.TotalAlloc-before.TotalAlloc) / saves
	t.Logf("a record is %d bytes on average; a Save allocated %d", record, perSave)
	if perSave > 2*record {
		t.Fatalf("a Save allocated %d bytes for a %d-byte record: its buffers, copies or indexes are not reused",
			perSave, record)
	}
}
