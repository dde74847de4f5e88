package cniserver_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/cni/delqueue"
)

func addrs(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	a := netip.MustParseAddr("10.0.2.10")
	for i := range out {
		out[i] = a
		a = a.Next()
	}
	return out
}

func att(id string) cniserver.Attachment {
	return cniserver.Attachment{Network: "allot", ContainerID: id, IfName: "eth0"}
}

func queue(t *testing.T, dir string, a cniserver.Attachment, at time.Time) string {
	t.Helper()
	p, err := delqueue.Write(dir, delqueue.Entry{Network: a.Network, ContainerID: a.ContainerID, IfName: a.IfName, QueuedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReplayDelQueue: good entries are applied in queue order and removed;
// corrupt ones are moved aside and reported without stopping the pass; a
// second pass does nothing.
func TestReplayDelQueue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	b := cniservertest.NewBackend()
	a, bb := att("aaaa"), att("bbbb")
	b.Seed(a, netip.MustParseAddr("10.0.2.1"))
	b.Seed(bb, netip.MustParseAddr("10.0.2.2"))
	now := time.Now()
	queue(t, dir, bb, now.Add(2*time.Second))
	queue(t, dir, a, now.Add(time.Second))
	corrupt := map[string]string{
		"del-1-truncated.json": `{"version":1,"network":"allot","contai`,
		"del-2-nokey.json":     `{"version":1,"queuedAt":"2026-01-01T00:00:00Z"}`,
	}
	for n, c := range corrupt {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	rep, err := cniserver.ReplayDelQueue(t.Context(), dir, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Applied, []cniserver.Attachment{a, bb}) {
		t.Errorf("applied %v, want [%v %v] in queue order", rep.Applied, a, bb)
	}
	if len(rep.Corrupt) != 2 || rep.Failed != 0 {
		t.Errorf("report %+v, want 2 corrupt moved aside, 0 failed", rep)
	}
	for _, p := range rep.Corrupt {
		if !strings.HasSuffix(p, ".corrupt") {
			t.Errorf("corrupt entry at %s", p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Errorf("corrupt entry not kept for the operator: %v", err)
		}
	}
	if len(b.Attachments()) != 0 {
		t.Errorf("attachments left after replay: %v", b.Attachments())
	}
	if paths, _ := delqueue.List(dir); len(paths) != 0 {
		t.Errorf("queue still lists %v", paths)
	}

	rep, err = cniserver.ReplayDelQueue(t.Context(), dir, b, nil)
	if err != nil || len(rep.Applied)+len(rep.Corrupt)+rep.Failed != 0 {
		t.Errorf("second pass: %+v, %v; want nothing to do", rep, err)
	}
	if b.Calls("del") != 2 {
		t.Errorf("backend saw %d DELs, want 2", b.Calls("del"))
	}
}

// TestReplayKeepsFailedEntries: a DEL the backend refuses stays queued and
// is applied on a later pass.
func TestReplayKeepsFailedEntries(t *testing.T) {
	dir := t.TempDir()
	b := cniservertest.NewBackend()
	a := att("cccc")
	b.Seed(a, netip.MustParseAddr("10.0.2.3"))
	queued := queue(t, dir, a, time.Now().Add(time.Second))

	b.Fail("del", errors.New("netlink busy"))
	rep, err := cniserver.ReplayDelQueue(t.Context(), dir, b, nil)
	if err != nil || rep.Failed != 1 || len(rep.Applied) != 0 {
		t.Fatalf("replay with a failing backend: %+v, %v", rep, err)
	}
	if _, err := os.Stat(queued); err != nil {
		t.Fatalf("failed entry was dropped: %v", err)
	}

	b.Fail("del", nil)
	rep, err = cniserver.ReplayDelQueue(t.Context(), dir, b, nil)
	if err != nil || !slices.Equal(rep.Applied, []cniserver.Attachment{a}) {
		t.Fatalf("retry pass: %+v, %v", rep, err)
	}
	if _, ok := b.Attachments()[a]; ok {
		t.Error("attachment survived the retried DEL")
	}
}

// TestReplayEdges: a missing queue dir is an empty queue; an ended context
// stops the pass with an error and applies nothing.
func TestReplayEdges(t *testing.T) {
	b := cniservertest.NewBackend()
	rep, err := cniserver.ReplayDelQueue(t.Context(), filepath.Join(t.TempDir(), "none"), b, nil)
	if err != nil || len(rep.Applied) != 0 {
		t.Errorf("missing dir: %+v, %v", rep, err)
	}
	dir := t.TempDir()
	queue(t, dir, att("dddd"), time.Now())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := cniserver.ReplayDelQueue(ctx, dir, b, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled replay: %v, want context.Canceled", err)
	}
	if b.Calls("del") != 0 {
		t.Error("cancelled replay applied a DEL")
	}
}

// TestReplayChecksKeys: a queued DEL whose key the server would refuse is
// moved aside like any corrupt entry, never handed to the backend.
func TestReplayChecksKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	b := cniservertest.NewBackend()
	queue(t, dir, cniserver.Attachment{Network: "allot", ContainerID: "a/b", IfName: "eth0"}, time.Now())
	good := att("cccc")
	b.Seed(good, netip.MustParseAddr("10.0.2.3"))
	queue(t, dir, good, time.Now().Add(time.Second))
	rep, err := cniserver.ReplayDelQueue(t.Context(), dir, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Corrupt) != 1 || !slices.Equal(rep.Applied, []cniserver.Attachment{good}) {
		t.Errorf("replay %+v, want the bad key moved aside and only %v applied", rep, good)
	}
	if n := b.Calls("del"); n != 1 {
		t.Errorf("backend saw %d DELs, want 1", n)
	}
}
