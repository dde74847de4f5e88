package plugin_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/cni/plugin"
)

// frozenSocket listens on path and never accepts: the kernel completes
// every connection into the backlog and nothing ever answers, which is what
// the plugin sees of an agent stopped with SIGSTOP.
func frozenSocket(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// TestFrozenAgent: an agent that accepts nothing costs STATUS, ADD and DEL
// about the connect bound each, not gRPC's 20 s connect timeout: STATUS
// says 50, ADD says 11, and DEL is queued for replay.
func TestFrozenAgent(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	rt := pod("ffff0000000000f1", "web-0")
	if _, err := n.cni.AddNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	n.agent.Stop()
	frozenSocket(t, n.agent.Socket)

	const slack = time.Second
	start := time.Now()
	err := n.cni.GetStatusNetworkList(t.Context(), n.list)
	if d := time.Since(start); d > plugin.StatusTimeout+slack {
		t.Errorf("STATUS against a frozen agent took %v, want at most %v", d, plugin.StatusTimeout+slack)
	}
	if code, msg := cniCode(t, err); code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS against a frozen agent: code %d %q, want 50", code, msg)
	}

	rt2 := pod("ffff0000000000f2", "web-1")
	start = time.Now()
	_, err = n.cni.AddNetworkList(t.Context(), n.list, rt2)
	if d := time.Since(start); d > plugin.ConnectTimeout+slack {
		t.Errorf("ADD against a frozen agent took %v, want at most %v", d, plugin.ConnectTimeout+slack)
	}
	if code, msg := cniCode(t, err); code != types.ErrTryAgainLater {
		t.Errorf("ADD against a frozen agent: code %d %q, want 11", code, msg)
	}

	start = time.Now()
	if err := n.cni.DelNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("DEL against a frozen agent must be queued and succeed: %v", err)
	}
	if d := time.Since(start); d > plugin.ConnectTimeout+slack {
		t.Errorf("DEL against a frozen agent took %v, want at most %v", d, plugin.ConnectTimeout+slack)
	}
	if entries, err := os.ReadDir(n.queueDir); err != nil || len(entries) != 1 {
		t.Errorf("queue dir holds %v (err %v), want the one DEL", entries, err)
	}
}

// TestDelHasItsOwnBound: a DEL the agent doesn't finish is given up after
// DelTimeout, not after the netconf's ADD timeout (60 s here), and queued
// for the agent to replay, so the runtime's teardown is not held up.
func TestDelHasItsOwnBound(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	list := editConflist(t, n, func(p map[string]any) { p["timeout"] = "60s" })
	rt := pod("ffff0000000000f3", "db-0")
	if _, err := n.cni.AddNetworkList(t.Context(), list, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	release := b.Stall("del")
	defer release()

	start := time.Now()
	err := n.cni.DelNetworkList(t.Context(), list, rt)
	d := time.Since(start)
	if err != nil {
		t.Fatalf("DEL past its bound must be queued and succeed: %v", err)
	}
	if d > plugin.DelTimeout+2*time.Second {
		t.Errorf("DEL took %v, want about DelTimeout (%v), well under the 60 s ADD timeout", d, plugin.DelTimeout)
	}
	entries, err := os.ReadDir(n.queueDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("queue dir holds %v (err %v), want the one DEL", entries, err)
	}
	if filepath.Ext(entries[0].Name()) != ".json" {
		t.Errorf("queue entry %s", entries[0].Name())
	}
}
