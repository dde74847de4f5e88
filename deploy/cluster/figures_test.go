package cluster

import (
	"testing"
	"time"
)

func TestPercentilesNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		in   []time.Duration
		want Percentiles
	}{
		{nil, Percentiles{}},
		{ms(7), Percentiles{7, 7, 7}},
		{ms(4, 1, 3, 2), Percentiles{2, 4, 4}},
		{ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 100), Percentiles{50, 100, 100}},
	} {
		if got := percentiles(tc.in); got != tc.want {
			t.Errorf("percentiles(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	var many []time.Duration
	for i := 1; i <= 200; i++ {
		many = append(many, time.Duration(i)*time.Millisecond)
	}
	if got := percentiles(many); got.P50 != 100 || got.P99 != 198 || got.Max != 200 {
		t.Errorf("percentiles(1..200 ms) = %+v, want p50 100, p99 198, max 200", got)
	}
}

func TestAllowedIdle(t *testing.T) {
	for _, tc := range []struct {
		name        string
		w           WarmTargets
		mode        string
		perENI      int
		addrs, enis int
	}{
		// One warm ENI of a c5.xlarge keeps 14 free, and less than another
		// ENI's worth may stay (the excess goes back in whole ENIs' worth),
		// on one ENI more than they fill.
		{"warm ENI", WarmTargets{WarmENIs: 1}, ModeSecondaryIP, 15, 27, 3},
		// With a type of few addresses per ENI the margin is the larger.
		{"warm ENI, small ENIs", WarmTargets{WarmENIs: 1}, ModeSecondaryIP, 4, 7, 4},
		// WARM_IP_TARGET wins over WARM_ENI_TARGET.
		{"warm IPs", WarmTargets{WarmIPs: 2, WarmENIs: 1}, ModeSecondaryIP, 6, 6, 2},
		{"minimum IPs", WarmTargets{MinimumIPs: 10}, ModeSecondaryIP, 15, 14, 1},
		// One warm prefix: less than another whole prefix may stay.
		{"warm prefix", WarmTargets{WarmPrefixes: 1}, ModePrefix, 15, 16, 1},
		{"two warm prefixes", WarmTargets{WarmPrefixes: 2}, ModePrefix, 15, 32, 1},
	} {
		a, e := tc.w.allowedIdle(tc.mode, tc.perENI)
		if a != tc.addrs || e != tc.enis {
			t.Errorf("%s: allowedIdle = %d addresses, %d ENIs; want %d, %d", tc.name, a, e, tc.addrs, tc.enis)
		}
	}
}

func TestCrossNodePairs(t *testing.T) {
	n0, n1, n2 := &Node{Name: "a"}, &Node{Name: "b"}, &Node{Name: "c"}
	pods := []*Pod{{Name: "a1", Node: n0}, {Name: "a2", Node: n0}, {Name: "b1", Node: n1}, {Name: "b2", Node: n1},
		{Name: "c1", Node: n2}, {Name: "c2", Node: n2}}
	pairs := CrossNodePairs(pods)
	if len(pairs) != len(pods) {
		t.Fatalf("%d pairs for %d pods", len(pairs), len(pods))
	}
	dst := map[string]int{}
	for _, p := range pairs {
		if p[0].Node == p[1].Node {
			t.Errorf("pair %s -> %s stays on one node", p[0].Name, p[1].Name)
		}
		dst[p[1].Name]++
	}
	for _, p := range pods {
		if dst[p.Name] == 0 {
			t.Errorf("pod %s is never a destination", p.Name)
		}
	}
	if CrossNodePairs(pods[:2]) != nil {
		t.Error("pairs on a single node")
	}
	// Uneven nodes: every pod is still a source, every pair crosses nodes.
	uneven := CrossNodePairs(pods[1:])
	if len(uneven) != 5 {
		t.Errorf("%d pairs for 5 pods", len(uneven))
	}
	for _, p := range uneven {
		if p[0].Node == p[1].Node {
			t.Errorf("pair %s -> %s stays on one node", p[0].Name, p[1].Name)
		}
	}
}

func TestCompareENIs(t *testing.T) {
	ec2 := NodeFootprint{ENIs: []ENIView{
		{ID: "eni-p", Primary: true},
		{ID: "eni-1", DeviceIndex: 1, Addresses: []string{"10.0.0.7", "10.0.0.8"}},
		{ID: "eni-2", DeviceIndex: 2, Addresses: []string{"10.0.0.9"}},
	}}
	rec := NodeFootprint{ENIs: []ENIView{
		{ID: "eni-1", Addresses: []string{"10.0.0.7"}},
		{ID: "eni-3", Addresses: []string{"10.0.0.10"}},
	}}
	status := map[string]string{"eni-1": "attached", "eni-3": "detached"}
	got := compareENIs("n", ec2, rec, status)
	// eni-p: primary without addresses needs no record; eni-1: addresses
	// differ; eni-2: no record; eni-3: recorded but not in EC2.
	if len(got) != 3 {
		t.Fatalf("findings %q, want 3", got)
	}
	same := compareENIs("n", NodeFootprint{ENIs: rec.ENIs[:1]}, NodeFootprint{ENIs: rec.ENIs[:1]}, status)
	if len(same) != 0 {
		t.Errorf("findings for equal views: %q", same)
	}
}
