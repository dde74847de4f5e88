package burst

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/awssim/throttle"
)

// TestVariantBuckets checks how a variant's table error and other tenant
// turn into the broker's share, awssim's buckets and the bound's share.
func TestVariantBuckets(t *testing.T) {
	for _, tc := range []struct {
		v                    Variant
		name                 string
		broker, cloud, bound float64
	}{
		{Variant{System: SystemAllot, Mode: daemon.ModePrefix, Share: 1}, "allot/prefix/share=1", 1, 1, 1},
		{Variant{System: SystemAllot, Mode: daemon.ModePrefix, Share: 0.5}, "allot/prefix/share=0.5", 0.5, 1, 0.5},
		// The broker believes 20% more than there is: awssim shrinks.
		{Variant{System: SystemAllot, Mode: daemon.ModePrefix, Share: 1, TableError: 0.2}, "allot/prefix/share=1/table+20%", 1, 1 / 1.2, 1 / 1.2},
		// The broker believes 20% less: it uses 80%, the bound is the account's.
		{Variant{System: SystemAllot, Mode: daemon.ModePrefix, Share: 1, TableError: -0.2}, "allot/prefix/share=1/table-20%", 0.8, 1, 1},
		{Variant{System: SystemAllot, Mode: daemon.ModeSecondaryIP, Share: 1, Tenant: 0.5}, "allot/secondary-ip/share=1/tenant=0.5", 1, 1, 0.5},
		{Variant{System: SystemAllot, Mode: daemon.ModeSecondaryIP, Share: 0.3, Tenant: 0.5}, "allot/secondary-ip/share=0.3/tenant=0.5", 0.3, 1, 0.3},
		{Variant{System: SystemIPAMD, Mode: daemon.ModePrefix, Share: 1}, "ipamd/prefix", 1, 1, 1},
		{Variant{System: SystemIPAMD, Mode: daemon.ModePrefix, Share: 1, Tuning: "WARM_PREFIX_TARGET=3"}, "ipamd/prefix/WARM_PREFIX_TARGET=3", 1, 1, 1},
	} {
		if got := tc.v.Name(); got != tc.name {
			t.Errorf("Name() = %q, want %q", got, tc.name)
		}
		for what, got := range map[string][2]float64{
			"broker share": {tc.v.brokerShare(), tc.broker},
			"cloud scale":  {tc.v.cloudBucketScale(), tc.cloud},
			"bound share":  {tc.v.boundShare(), tc.bound},
		} {
			if math.Abs(got[0]-got[1]) > 1e-9 {
				t.Errorf("%s: %s %g, want %g", tc.name, what, got[0], got[1])
			}
		}
	}
}

// TestCloudBucketScale checks that a scaled cloud shrinks every bucket of
// the scenario, size and refill alike.
func TestCloudBucketScale(t *testing.T) {
	sc := CloudConfig{Nodes: 1, InstanceType: "c5.xlarge", Subnets: 1, BucketScale: 0.5}.Scenario()
	b, ok := sc.Throttle.Buckets["CreateNetworkInterface"]
	if !ok || b.Capacity != 50 || b.Refill != 2.5 {
		t.Errorf("CreateNetworkInterface bucket %+v (present %v), want 50 and 2.5/s", b, ok)
	}
	if sc := (CloudConfig{Nodes: 1, InstanceType: "c5.xlarge", Subnets: 1}).Scenario(); len(sc.Throttle.Buckets) != 0 {
		t.Errorf("unscaled cloud overrides buckets: %v", sc.Throttle.Buckets)
	}
}

// TestParseTunings checks the per-mode ipamd configurations flag and that a
// bad setting is refused with a clear error.
func TestParseTunings(t *testing.T) {
	got, err := ParseTunings(DefaultIPAMDTuned)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[daemon.ModeSecondaryIP]) != 1 || got[daemon.ModePrefix][0] != "WARM_PREFIX_TARGET=3" {
		t.Errorf("ParseTunings(default) = %v", got)
	}
	for _, bad := range []string{"prefix:WARM_PREFIX_TARGET=x", "prefix:NOPE=1", "ipv6:WARM_IP_TARGET=1", "WARM_IP_TARGET=1"} {
		if _, err := ParseTunings(bad); err == nil {
			t.Errorf("ParseTunings(%q) accepted", bad)
		}
	}
}

// TestProfiles checks the profiles flag, the names they give variants and
// when their pods arrive.
func TestProfiles(t *testing.T) {
	ps, err := ParseProfiles(DefaultProfiles)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[1].Rate != 100 || ps[2].Late != 0.2 {
		t.Fatalf("ParseProfiles(%q) = %+v", DefaultProfiles, ps)
	}
	v := Variant{System: SystemCilium, Mode: daemon.ModePrefix, Share: 1, Profile: ps[1]}
	if got := v.Name(); got != "cilium/prefix@ramp=100/s" {
		t.Errorf("Name() = %q", got)
	}
	// 500 nodes x 46 pods at 100/s: the last pod is asked for at 229.99 s.
	if got := ps[1].lastArrival(500, 46); got.Seconds() < 229.98 || got.Seconds() > 230 {
		t.Errorf("ramp's last arrival %s, want 229.99s", got)
	}
	// 100 late nodes join in four batches of 25, 10 s apart.
	if late := ps[2].lateNodes(500); late != 100 || joinAt(24, late) != 0 || joinAt(25, late).Seconds() != 10 || ps[2].lastArrival(500, 46).Seconds() != 30 {
		t.Errorf("join: %d late nodes, batches at %s and %s, last %s", late, joinAt(24, late), joinAt(25, late), ps[2].lastArrival(500, 46))
	}
	for _, bad := range []string{"ramp=0", "ramp=x", "join=1", "join=0", "storm"} {
		if _, err := ParseProfiles(bad); err == nil {
			t.Errorf("ParseProfiles(%q) accepted", bad)
		}
	}
}

// TestPlanPolicies checks that every allot variant runs once per policy
// when two are asked for, and that the name says which.
func TestPlanPolicies(t *testing.T) {
	c := Config{Modes: []daemon.Mode{daemon.ModePrefix}, Shares: []float64{1}, PlanPolicies: []string{"time-optimal", "fewest-calls"}, Baseline: true}
	var names []string
	for _, v := range c.Variants() {
		names = append(names, v.Name())
	}
	want := []string{"allot/prefix/share=1/time-optimal", "allot/prefix/share=1/fewest-calls", "ipamd/prefix"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("variants %v, want %v", names, want)
	}
}

// TestAblation checks that the ablation adds allot under the naive planner
// at share 1 once per mode, after allot's own rows, and not again when the
// policies already name it.
func TestAblation(t *testing.T) {
	modes := []daemon.Mode{daemon.ModeSecondaryIP, daemon.ModePrefix}
	c := Config{Modes: modes, Shares: []float64{1, 0.5}, Ablation: true}
	var names []string
	for _, v := range c.Variants() {
		names = append(names, v.Name())
	}
	want := []string{"allot/secondary-ip/share=1", "allot/secondary-ip/share=0.5", "allot/secondary-ip/share=1/naive",
		"allot/prefix/share=1", "allot/prefix/share=0.5", "allot/prefix/share=1/naive"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("variants %v, want %v", names, want)
	}
	c = Config{Modes: modes[1:], Shares: []float64{1}, Ablation: true, PlanPolicies: []string{"time-optimal", "naive"}}
	names = nil
	for _, v := range c.Variants() {
		names = append(names, v.Name())
	}
	want = []string{"allot/prefix/share=1/time-optimal", "allot/prefix/share=1/naive"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("with naive among the policies: variants %v, want %v", names, want)
	}
}

// TestBrokerArgsRoundTrip: the broker child's command line carries every
// setting the harness gives it, the bound on the agents' calls among
// them, back into the child's config.
func TestBrokerArgsRoundTrip(t *testing.T) {
	want := BrokerConfig{DataDir: "/d", EtcdEndpoint: "e:1", EC2Endpoint: "http://c", Share: 0.5, TimeScale: 5,
		PlanPolicy: "fewest-calls", ReleaseAfter: time.Minute, Fsync: true, Reconciler: true,
		CPUProfile: "/p", RoundCPU: true, Nice: -10, PKIDir: "/k", MaxAgentCalls: 256}
	var got BrokerConfig
	fs := newFlagSet("broker")
	got.Flags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("parsed back\n%+v\nwant\n%+v", got, want)
	}
}

// TestCloudArgsRoundTrip: the same for awssim's child.
func TestCloudArgsRoundTrip(t *testing.T) {
	want := CloudConfig{Nodes: 7, InstanceType: "m5.large", Subnets: 3, TimeScale: 5, Seed: 9,
		Semantics: throttle.Semantics{SharedDescribe: true, DiscreteRefill: true}, BucketScale: 0.5, Nice: -5}
	var got CloudConfig
	fs := newFlagSet("cloud")
	got.Flags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("parsed back\n%+v\nwant\n%+v", got, want)
	}
}
