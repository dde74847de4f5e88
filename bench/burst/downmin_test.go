package burst

import (
	"testing"

	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim/world"
)

func TestReleaseMinimum(t *testing.T) {
	full := func(primary bool) heldENI { return heldENI{primary: primary, addrs: 14} }
	for _, c := range []struct {
		name      string
		enis      []heldENI
		keep      int
		want      releaseCalls
		wantCalls int
	}{
		// c5.xlarge after a 46-pod burst: four full ENIs, keep one ENI's
		// worth: the three secondaries go whole, nothing is unassigned.
		{"burst layout", []heldENI{full(true), full(false), full(false), full(false)}, 14, releaseCalls{whole: 3}, 6},
		{"within margin", []heldENI{{primary: true, addrs: 18}}, 14, releaseCalls{}, 0},
		// Only the primary: addresses are unassigned from it.
		{"primary only", []heldENI{{primary: true, addrs: 30}}, 14, releaseCalls{unassign: 1}, 1},
		// The primary covers keep: the secondary goes, the primary gives
		// back its surplus.
		{"small secondary", []heldENI{{primary: true, addrs: 20}, {addrs: 3}}, 14, releaseCalls{whole: 1, unassign: 1}, 3},
		// One secondary must stay: the fuller one, whose surplus of 8 is
		// one Unassign.
		{"one stays", []heldENI{{primary: true, addrs: 2}, {addrs: 10}, {addrs: 20}}, 14, releaseCalls{whole: 1, unassign: 1}, 3},
		// Giving up the secondary would leave fewer than keep.
		{"keep on a secondary", []heldENI{{primary: true, addrs: 2}, {addrs: 28}}, 14, releaseCalls{unassign: 1}, 1},
	} {
		got := releaseMinimum(c.enis, c.keep, releaseMargin)
		if got != c.want || got.total() != c.wantCalls {
			t.Errorf("%s: %+v (%d calls), want %+v (%d)", c.name, got, got.total(), c.want, c.wantCalls)
		}
	}
}

func TestDownMinimum(t *testing.T) {
	eni := func(node string, dev, n int) world.NetworkInterface {
		e := world.NetworkInterface{Attachment: &world.Attachment{InstanceID: node, DeviceIndex: dev}}
		for range n {
			e.SecondaryIPs = append(e.SecondaryIPs, "x")
		}
		return e
	}
	enis := []world.NetworkInterface{
		eni("i-1", 0, 14), eni("i-1", 1, 14), eni("i-1", 2, 14), eni("i-1", 3, 14),
		eni("i-2", 0, 14), eni("i-2", 1, 14),
		eni("i-3", 0, 14),
		{}, // detached: not counted
	}
	got := downMinimum(pool.DefaultTargets(false), pool.Limits{MaxENIs: 4, IPv4PerENI: 15}, enis)
	want := map[string]int{"DetachNetworkInterface": 4, "DeleteNetworkInterface": 4}
	if len(got) != len(want) || got["DetachNetworkInterface"] != 4 || got["DeleteNetworkInterface"] != 4 {
		t.Errorf("downMinimum = %v, want %v", got, want)
	}
}
