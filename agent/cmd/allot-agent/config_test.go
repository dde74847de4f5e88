package main

import (
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/cni/plugin"
)

func TestParseFlagsRequiresEndpoints(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker=127.0.0.1:7600"}, "--imds-endpoint is required"},
		{[]string{"--imds-endpoint=http://127.0.0.1:1"}, "--broker is required"},
		{[]string{"--imds-endpoint=http://127.0.0.1:1", "--broker=b:1", "--broker-cert=c"}, "go together"},
		{[]string{"--imds-endpoint=http://127.0.0.1:1", "--broker=b:1", "--snat-exclude-cidrs=nope"}, "--snat-exclude-cidrs"},
		{[]string{"--imds-endpoint=http://127.0.0.1:1", "--broker=b:1", "stray"}, "unexpected arguments"},
		{[]string{"--imds-endpoint=http://127.0.0.1:1", "--broker=b:1", "--node-name=Node_1"}, "--node-name"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%v) = %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{
		"--imds-endpoint=http://127.0.0.1:9999", "--broker=10.1.0.1:7600, 10.1.0.2:7600",
		"--mode=prefix", "--warm-prefix-target=2", "--max-enis=3", "--cooldown=0",
		"--max-add-wait=5s", "--snat-exclude-cidrs=192.168.0.0/16,172.16.1.7/12", "--external-snat",
		"--checkpoint=/tmp/x/ck.json", "--introspect-addr=", "--demand-interval=250ms",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := c.agent
	if !slices.Equal(c.brokers, []string{"10.1.0.1:7600", "10.1.0.2:7600"}) {
		t.Errorf("brokers %v", c.brokers)
	}
	if a.Mode != daemon.ModePrefix || a.Warm.WarmPrefixes != 2 || a.Warm.MaxENIs != 3 {
		t.Errorf("mode/targets %v %+v", a.Mode, a.Warm)
	}
	if a.Cooldown >= 0 {
		t.Errorf("--cooldown=0 gave %v, want negative (no cooldown)", a.Cooldown)
	}
	if a.DemandInterval != 250*time.Millisecond {
		t.Errorf("--demand-interval=250ms gave %v", a.DemandInterval)
	}
	if a.RepairTokenPath != "/tmp/x/repair-token" {
		t.Errorf("repair token file %q, want it beside the checkpoint", a.RepairTokenPath)
	}
	if a.MaxAddWait != 5*time.Second || !a.ExternalSNAT || a.CheckpointPath != "/tmp/x/ck.json" || a.IntrospectAddr != "" {
		t.Errorf("config %+v", a)
	}
	want := []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("172.16.0.0/12")}
	if !slices.Equal(a.SNATExcludeCIDRs, want) {
		t.Errorf("exclude %v, want %v", a.SNATExcludeCIDRs, want)
	}
	// Defaults: the plugin's socket and queue, the 30 s cooldown.
	d, err := parseFlags([]string{"--imds-endpoint=http://127.0.0.1:9999", "--broker=b:1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if d.agent.RepairTokenPath != "/var/lib/allot/repair-token" {
		t.Errorf("default repair token file %q", d.agent.RepairTokenPath)
	}
	if d.agent.IMDSCheckAfter != daemon.DefaultIMDSCheckAfter {
		t.Errorf("default IMDS check after %v", d.agent.IMDSCheckAfter)
	}
	off, err := parseFlags([]string{"--imds-endpoint=http://127.0.0.1:9999", "--broker=b:1", "--repair-token-file=none",
		"--imds-check-after=0"}, io.Discard)
	if err != nil || off.agent.RepairTokenPath != "" || off.agent.IMDSCheckAfter >= 0 {
		t.Errorf("--repair-token-file=none --imds-check-after=0: %q %v %v, want repair and the check off",
			off.agent.RepairTokenPath, off.agent.IMDSCheckAfter, err)
	}
	later, err := parseFlags([]string{"--imds-endpoint=http://127.0.0.1:9999", "--broker=b:1", "--imds-check-after=45s"}, io.Discard)
	if err != nil || later.agent.IMDSCheckAfter != 45*time.Second {
		t.Errorf("--imds-check-after=45s: %v %v", later.agent.IMDSCheckAfter, err)
	}
	if d.agent.SocketPath != "/run/allot/cni.sock" || d.agent.DelQueueDir != "/var/lib/allot/del-queue" || d.agent.Cooldown != 30*time.Second {
		t.Errorf("defaults %+v", d.agent)
	}
	// Demand updates coalesce over 100 ms; ADDs wait 100 s on an empty pool.
	if d.agent.DemandInterval != 100*time.Millisecond || d.agent.MaxAddWait != 100*time.Second {
		t.Errorf("defaults: demand interval %v, max add wait %v", d.agent.DemandInterval, d.agent.MaxAddWait)
	}
	z, err := parseFlags([]string{"--imds-endpoint=http://127.0.0.1:9999", "--broker=b:1", "--demand-interval=0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if z.agent.DemandInterval >= 0 {
		t.Errorf("--demand-interval=0 gave %v, want negative (every change at once)", z.agent.DemandInterval)
	}
}

// TestMaxAddWaitBound: the agent's wait for addresses ends in time for its
// answer to reach the plugin before the plugin's ADD timeout, by default
// and as a flag; a longer wait is refused, naming the bound.
func TestMaxAddWaitBound(t *testing.T) {
	if limit := plugin.DefaultTimeout - plugin.AgentMargin; daemon.DefaultMaxAddWait > limit || daemon.DefaultMaxAddWait <= 0 {
		t.Errorf("default max add wait %v, want positive and at most %v (the plugin's ADD timeout %v less %v)",
			daemon.DefaultMaxAddWait, limit, plugin.DefaultTimeout, plugin.AgentMargin)
	}
	base := []string{"--imds-endpoint=http://127.0.0.1:9999", "--broker=b:1"}
	for wait, ok := range map[string]bool{"100s": true, "30s": true, "101s": false, "2m": false} {
		_, err := parseFlags(append(base, "--max-add-wait="+wait), io.Discard)
		if ok && err != nil {
			t.Errorf("--max-add-wait=%s: %v", wait, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "--max-add-wait") || !strings.Contains(err.Error(), "1m40s")) {
			t.Errorf("--max-add-wait=%s: err %v, want a refusal naming the flag and the 1m40s bound", wait, err)
		}
	}
}
