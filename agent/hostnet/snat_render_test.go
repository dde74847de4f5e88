package hostnet

import (
	"net/netip"
	"slices"
	"testing"
)

// TestSNATRulesRender pins the chain SetupSNAT builds, without a kernel; the
// netns test checks the kernel lists the same.
func TestSNATRulesRender(t *testing.T) {
	cfg := SNATConfig{
		PrimaryMAC: "02:00:00:00:00:01",
		PrimaryIP:  netip.MustParseAddr("10.0.0.10"),
		VPCCIDRs:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("100.64.0.0/10")},
		// Not masked on purpose: the rule matches the network.
		ExcludeCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.7.1/16"), netip.MustParsePrefix("198.51.100.7/32")},
	}
	got := renderAll(snatRules("eth0", cfg), false)
	want := []string{
		`oifname != "eth0" return`,
		`ip saddr 10.0.0.10 return`,
		`ip daddr 10.0.0.0/16 return`,
		`ip daddr 100.64.0.0/10 return`,
		`ip daddr 192.168.0.0/16 return`,
		`ip daddr 198.51.100.7 return`,
		`counter snat to 10.0.0.10 fully-random`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules:\n got %q\nwant %q", got, want)
	}
	if w := withoutCounters([]string{"counter packets 12 bytes 1008 snat to 10.0.0.10 fully-random"}); w[0] != want[len(want)-1] {
		t.Errorf("withoutCounters = %q", w)
	}
}
