package delqueue

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func entry(id string, at time.Time) Entry {
	return Entry{Network: "allot", ContainerID: id, IfName: "eth0", NetNS: "/run/netns/x", PodName: "p", QueuedAt: at}
}

// TestWriteReadRoundTrip: an entry comes back as written, the file is
// private, no temporary file is left, and List orders by queue time.
func TestWriteReadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	later, err := Write(dir, entry("b", t0.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	first, err := Write(dir, entry("a", t0))
	if err != nil {
		t.Fatal(err)
	}
	// Files List must skip.
	for _, n := range []string{".tmp-del-1.json", "del-2.json.corrupt", "README"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	paths, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || paths[0] != first || paths[1] != later {
		t.Fatalf("List = %v, want [%s %s]", paths, first, later)
	}
	got, err := Read(first)
	if err != nil {
		t.Fatal(err)
	}
	want := entry("a", t0)
	want.Version = Version
	if got != want {
		t.Errorf("Read = %+v, want %+v", got, want)
	}
	fi, err := os.Stat(first)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("entry mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	di, err := os.Stat(dir)
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v (%v), want 0700", di.Mode().Perm(), err)
	}
	if err := Remove(first); err != nil {
		t.Fatal(err)
	}
	if paths, _ := List(dir); len(paths) != 1 {
		t.Errorf("after Remove List = %v", paths)
	}
}

// TestWriteRefusesIncompleteEntry: a DEL without its key would be replayed
// as nothing; refuse it so the plugin fails and the runtime retries.
func TestWriteRefusesIncompleteEntry(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []Entry{
		{ContainerID: "a", IfName: "eth0", QueuedAt: time.Now()},
		{Network: "n", IfName: "eth0", QueuedAt: time.Now()},
		{Network: "n", ContainerID: "a", QueuedAt: time.Now()},
		{Network: "n", ContainerID: "a", IfName: "eth0"},
	} {
		if _, err := Write(dir, e); err == nil {
			t.Errorf("Write(%+v) succeeded", e)
		}
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("refused writes left %v", des)
	}
}

// TestReadCorrupt: truncated, non-JSON, wrong-version and keyless files are
// ErrCorrupt; MoveAside takes them out of List.
func TestReadCorrupt(t *testing.T) {
	dir := t.TempDir()
	good, err := Write(dir, entry("a", time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(good)
	bad := map[string]string{
		"del-1-truncated.json": string(data[:len(data)/2]),
		"del-2-empty.json":     "",
		"del-3-garbage.json":   "\x00\x01garbage",
		"del-4-version.json":   strings.Replace(string(data), `"version":1`, `"version":7`, 1),
		"del-5-nokey.json":     `{"version":1,"network":"allot","ifname":"eth0","queuedAt":"2026-01-01T00:00:00Z"}`,
	}
	for n, c := range bad {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Read(%s) = %v, want ErrCorrupt", n, err)
		}
		moved, err := MoveAside(p)
		if err != nil || !strings.HasSuffix(moved, ".corrupt") {
			t.Errorf("MoveAside(%s) = %q, %v", n, moved, err)
		}
	}
	if paths, _ := List(dir); len(paths) != 1 || paths[0] != good {
		t.Errorf("List after moving corrupt files aside = %v, want only %s", paths, good)
	}
}

// TestRemoveStaleTemps removes only old temporary files.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	old, young := filepath.Join(dir, ".tmp-del-old.json"), filepath.Join(dir, ".tmp-del-young.json")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if err := os.Chtimes(old, now.Add(-time.Hour), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := RemoveStaleTemps(dir, 10*time.Minute, now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old temp file kept: %v", err)
	}
	if _, err := os.Stat(young); err != nil {
		t.Errorf("young temp file removed: %v", err)
	}
	if err := RemoveStaleTemps(filepath.Join(dir, "missing"), time.Minute, now); err != nil {
		t.Errorf("missing dir: %v", err)
	}
}
