package checkpoint

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// smallDisk mounts a tmpfs of size bytes on a new directory and unmounts
// it when the test ends: a real file system that runs out of space.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("allot-test-tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0700"); err != nil {
		t.Fatalf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until the file system is full.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			return path
		}
	}
}

// bigState is sample() with n more free addresses, so its record is larger
// than what a full disk has left.
func bigState(seq uint64, n int) State {
	s := sample()
	s.UsageSeq = seq
	base := s.Addresses[2]
	for i := range n {
		a := base
		a.Addr = netipAdd(netip.MustParseAddr("10.0.4.0"), i)
		s.Addresses = append(s.Addresses, a)
	}
	return s
}

// TestFullDisk: on a file system with no space left, a Save fails with the
// reason and commits nothing, appended or compacted: a Load (a restarted
// agent) finds the last committed state, nothing of the failed record is
// left for the next append to follow, no temp file is left behind, and once
// space is freed the next Save commits.
func TestFullDisk(t *testing.T) {
	dir := smallDisk(t, "256k")
	f := New(filepath.Join(dir, "state.json"))
	want := saveSeqs(t, f, 3)
	filler := fill(t, dir)
	if err := f.Save(bigState(4, 200)); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("append on a full disk: %v, want no space left", err)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after the failed append: %+v %v", got, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The next append follows the last committed record, not a part of
	// the failed one.
	want = bigState(5, 200)
	if err := f.Save(want); err != nil {
		t.Fatalf("append once space is back: %v", err)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after the next append: %v", err)
	}

	filler = fill(t, dir)
	f.mu.Lock()
	f.records = compactRecords // the next Save compacts
	f.mu.Unlock()
	if err := f.Save(bigState(6, 200)); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("compaction on a full disk: %v, want no space left", err)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after the failed compaction: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "state.json" && e.Name() != "filler" {
			t.Errorf("left behind on the full disk: %s", e.Name())
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	want = bigState(7, 200)
	if err := f.Save(want); err != nil {
		t.Fatalf("save once space is back: %v", err)
	}
	if got, err := New(f.Path()).Load(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load after space came back: %v", err)
	}
}

// netipAdd is a plus n addresses.
func netipAdd(a netip.Addr, n int) netip.Addr {
	for range n {
		a = a.Next()
	}
	return a
}
