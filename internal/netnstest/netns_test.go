package netnstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

func testPrefix(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "allot-nstest-" + hex.EncodeToString(b)
}

func TestCreateDoDelete(t *testing.T) {
	prefix := testPrefix(t)
	n, err := Create(prefix + "-a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Delete() })
	if n.Path != Dir+"/"+prefix+"-a" {
		t.Errorf("Path = %s", n.Path)
	}
	lo, err := n.NL.LinkByName("lo")
	if err != nil {
		t.Fatalf("lo in %s: %v", n.Name, err)
	}
	if lo.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("lo in %s is down (%v), want up", n.Name, lo.Attrs().Flags)
	}
	if err := n.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	// Do runs inside the namespace: the value written there is read back
	// there, and the host's own namespace is left as it was.
	var inside []byte
	if err := n.Do(func() (err error) { inside, err = os.ReadFile("/proc/sys/net/ipv4/ip_forward"); return }); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(inside)) != "1" {
		t.Errorf("ip_forward inside = %q, want 1", inside)
	}
	var pathIno, handleIno string
	_ = DoInPath(n.Path, func() error { h, _ := netns.Get(); pathIno = h.UniqueId(); h.Close(); return nil })
	_ = DoIn(n.Handle(), func() error { h, _ := netns.Get(); handleIno = h.UniqueId(); h.Close(); return nil })
	if pathIno == "" || pathIno != handleIno {
		t.Errorf("DoInPath ran in %q, DoIn in %q; want the same namespace", pathIno, handleIno)
	}
	host, _ := netns.Get()
	defer host.Close()
	if host.UniqueId() == pathIno {
		t.Error("the test's own thread is in the created namespace")
	}
	want := errors.New("fn failed")
	if err := n.Do(func() error { return want }); err != want {
		t.Errorf("Do returned %v, want fn's own error", err)
	}

	// A taken name fails and leaves the namespace that holds it alone.
	if _, err := Create(prefix + "-a"); !errors.Is(err, os.ErrExist) {
		t.Errorf("Create of a taken name: %v, want ErrExist", err)
	}
	if _, err := os.Stat(n.Path); err != nil {
		t.Errorf("the taken namespace is gone: %v", err)
	}

	names, err := WithPrefix(prefix)
	if err != nil || len(names) != 1 || names[0] != prefix+"-a" {
		t.Errorf("WithPrefix = %v, %v; want [%s-a]", names, err, prefix)
	}
	if err := n.Delete(); err != nil {
		t.Fatal(err)
	}
	if err := n.Delete(); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	if names, _ := WithPrefix(prefix); len(names) != 0 {
		t.Errorf("left after Delete: %v", names)
	}
}

// TestDeleteLeftoverFile: a mount point nothing is mounted on (a crashed
// run's leftover) is removed too.
func TestDeleteLeftoverFile(t *testing.T) {
	name := testPrefix(t) + "-left"
	if err := os.MkdirAll(Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Dir+"/"+name, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(Dir + "/" + name); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover still there: %v", err)
	}
	if err := Delete(name); err != nil {
		t.Errorf("Delete of a name already gone: %v", err)
	}
}

func TestRetryDump(t *testing.T) {
	for _, tt := range []struct {
		interrupted int
		wantCalls   int
		wantErr     bool
	}{
		{0, 1, false},
		{3, 4, false},
		{9, 10, false},
		{100, 10, true},
	} {
		calls := 0
		v, err := RetryDump(func() (int, error) {
			calls++
			if calls <= tt.interrupted {
				return -1, netlink.ErrDumpInterrupted
			}
			return 7, nil
		})
		if calls != tt.wantCalls || (err != nil) != tt.wantErr {
			t.Errorf("%d interruptions: %d calls, err %v; want %d calls, error %v", tt.interrupted, calls, err, tt.wantCalls, tt.wantErr)
		}
		if !tt.wantErr && v != 7 {
			t.Errorf("%d interruptions: value %d, want 7", tt.interrupted, v)
		}
		if tt.wantErr && !errors.Is(err, netlink.ErrDumpInterrupted) {
			t.Errorf("error %v does not wrap ErrDumpInterrupted", err)
		}
	}
	other := fmt.Errorf("permission denied")
	calls := 0
	if _, err := RetryDump(func() (int, error) { calls++; return 0, other }); err != other || calls != 1 {
		t.Errorf("another error: %v after %d calls, want it at once", err, calls)
	}
}
