package ipamd

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/allotnet/allot/agent/cniserver"
)

// TestTooLow checks isDatastorePoolTooLow's thresholds on a c5.xlarge (14
// secondary addresses or prefixes per ENI, max pods 58).
func TestTooLow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix bool
		s      stats
		low    bool
	}{
		{"secondary: empty", false, stats{enis: 1}, true},
		{"secondary: 13 free", false, stats{enis: 1, total: 14, assigned: 1}, true},
		{"secondary: a whole ENI free", false, stats{enis: 2, total: 28, assigned: 14}, false},
		{"secondary: max pods reached", false, stats{enis: 4, total: 58, assigned: 58}, false},
		{"prefix: empty", true, stats{enis: 1}, true},
		{"prefix: 15 free", true, stats{enis: 1, total: 32, assigned: 17, prefixes: 2}, true},
		{"prefix: 16 free", true, stats{enis: 1, total: 32, assigned: 16, prefixes: 2, freePrefixes: 1}, false},
	} {
		n := &Node{cfg: Config{PrefixMode: tc.prefix, WarmENITarget: 1, WarmPrefixTarget: 1, MaxPods: 58}, maxIPsPerENI: 14}
		if got := n.tooLow(tc.s); got != tc.low {
			t.Errorf("%s: tooLow(%+v) = %v, want %v", tc.name, tc.s, got, tc.low)
		}
	}
}

// TestDatastore checks that addresses of secondary IPs and of prefixes are
// handed out once each, that a retried ADD gets the same address, and that
// an empty datastore fails at once with the CNI's "try again" error.
func TestDatastore(t *testing.T) {
	d := newDatastore()
	d.addENI("eni-1", 0, true)
	d.addIPs("eni-1", []netip.Addr{netip.MustParseAddr("10.0.0.10")})
	d.addENI("eni-2", 1, false)
	d.addPrefixes("eni-2", []netip.Prefix{netip.MustParsePrefix("10.0.1.16/28")})
	if s := d.stats(); s.total != 17 || s.prefixes != 1 || s.freePrefixes != 1 {
		t.Fatalf("stats %+v, want 17 addresses and 1 free prefix", s)
	}
	n := &Node{ds: d}
	seen := map[netip.Addr]bool{}
	for i := range 17 {
		req := cniserver.Request{Attachment: cniserver.Attachment{Network: "n", ContainerID: string(rune('a' + i)), IfName: "eth0"}}
		res, err := n.Add(context.Background(), req)
		if err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
		if seen[res.Address.Addr()] {
			t.Fatalf("add %d: %v handed out twice", i, res.Address)
		}
		seen[res.Address.Addr()] = true
		again, err := n.Add(context.Background(), req)
		if err != nil || again.Address != res.Address {
			t.Fatalf("retried add %d: %v, %v; want %v", i, again.Address, err, res.Address)
		}
	}
	if s := d.stats(); s.freePrefixes != 0 || s.available() != 0 {
		t.Errorf("stats %+v after 17 pods, want nothing free", s)
	}
	_, err := n.Add(context.Background(), cniserver.Request{Attachment: cniserver.Attachment{Network: "n", ContainerID: "z", IfName: "eth0"}})
	if !errors.Is(err, cniserver.ErrPoolEmpty) {
		t.Errorf("add on a full datastore: %v, want ErrPoolEmpty", err)
	}
}
