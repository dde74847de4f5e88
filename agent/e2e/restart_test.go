package e2e_test

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestKill9MidAdds: allot-agent is killed with SIGKILL while ADDs are in
// flight, and started again on the same files. Every attachment comes back
// from the checkpoint with its network (a host route removed while the
// agent was down is restored), nothing is given back — EC2 still has every
// address and ENI, the broker's records lost nothing — and the runtime's
// retries of the interrupted ADDs succeed, each pod keeping the address it
// had been recorded with; one wired before the kill but not recorded gets
// an address no other pod has (the one its veth still routes is held back).
func TestKill9MidAdds(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{
		WarmIPs: 10, MinimumIPs: 40, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, 3*time.Minute)

	first := newPods(t, "before", 10)
	addrs := addAll(t, ctx, env.Runtime, first, 4)
	env.Agent.WaitFree(t, 30, 30*time.Second)
	ec2Before := env.Cloud.Assigned(t)
	brokerBefore := env.Broker.Records(t)

	// ADDs in flight: kill the agent once a few of them are recorded.
	racing := newPods(t, "racing", 20)
	type outcome struct {
		addr netip.Addr
		err  error
	}
	var mu sync.Mutex
	outcomes := map[*harness.Pod]outcome{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, p := range racing {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := env.Runtime.Add(ctx, p)
			o := outcome{err: err}
			if err == nil {
				o.addr, o.err = addrOf(res)
			}
			mu.Lock()
			outcomes[p] = o
			mu.Unlock()
		})
	}
	waitAllocations(t, env, len(first)+4)
	env.Agent.Kill9()
	wg.Wait()

	recorded, err := env.Agent.Checkpoint()
	if err != nil {
		t.Fatalf("checkpoint after kill -9: %v", err)
	}
	atKill := harness.CheckpointRecords(recorded)
	var succeeded, failed int
	for p, o := range outcomes {
		if o.err == nil {
			succeeded++
			if atKill[harness.Key(harness.Network, p)] != o.addr {
				t.Errorf("ADD of %s answered %s, but the checkpoint holds %s", p, o.addr, atKill[harness.Key(harness.Network, p)])
			}
		} else {
			failed++
			if code := cniCode(o.err); code != 11 {
				t.Errorf("ADD of %s interrupted by the kill: %v (code %d), want 11 (try again later)", p, o.err, code)
			}
		}
	}
	t.Logf("at the kill: %d racing ADDs answered, %d failed, %d attachments recorded", succeeded, failed, len(atKill))
	if failed == 0 {
		t.Log("every racing ADD finished before the kill landed; the restart is still checked")
	}

	// While the agent is down, one pod loses its host route.
	victim := first[0]
	hv, err := env.Node.NS.NL.LinkByName(harness.HostVethName(harness.Network, victim))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Node.NS.NL.RouteDel(&netlink.Route{LinkIndex: hv.Attrs().Index, Table: unix.RT_TABLE_MAIN,
		Dst: &net.IPNet{IP: addrs[victim].AsSlice(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		t.Fatal(err)
	}

	env.Agent.Start()
	env.Agent.WaitReady(t, 30*time.Second)

	// An ADD the kill cut short may have wired its pod before its record
	// was durable (the agent wires while it writes): the runtime got no
	// success for it, and its veth waits for the retry or CNI GC.
	var interrupted []*harness.Pod
	for p, o := range outcomes {
		if o.err != nil {
			interrupted = append(interrupted, p)
		}
	}
	restored := agreementBut(t, ctx, env, interrupted)
	for _, d := range harness.Diff("checkpoint at the kill", atKill, "after restart", restored) {
		t.Error(d)
	}
	verifyWired(t, env, addrs) // the victim's route is back

	// The runtime retries every racing ADD (kubelet would, for the failed
	// ones; an answered ADD retried must be answered the same).
	for _, p := range racing {
		res, err := env.Runtime.Add(ctx, p)
		if err != nil {
			t.Errorf("retried ADD of %s: %v", p, err)
			continue
		}
		got := resultAddr(t, res)
		if want, ok := atKill[harness.Key(harness.Network, p)]; ok && got != want {
			t.Errorf("retried ADD of %s got %s, but it was recorded with %s before the kill", p, got, want)
		}
		addrs[p] = got
	}
	if len(addrs) != len(first)+len(racing) {
		t.Fatalf("%d pods have addresses, want %d", len(addrs), len(first)+len(racing))
	}
	distinct(t, addrs)
	verifyWired(t, env, addrs)
	if recs := agreement(t, ctx, env); len(recs) != len(addrs) {
		t.Errorf("checkpoint holds %d attachments, want %d: no stray record of an interrupted ADD", len(recs), len(addrs))
	}
	for _, p := range append(slices.Clone(first), racing...) {
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s after restart: %v", p, err)
		}
	}

	assertNothingReleased(t, "EC2", ec2Before, env.Cloud.Assigned(t))
	assertNothingReleased(t, "broker", brokerBefore, env.Broker.Records(t))
	if err := env.Node.Err(); err != nil {
		t.Error(err)
	}
}

// waitAllocations waits until the checkpoint records at least n
// attachments.
func waitAllocations(t *testing.T, env *harness.Env, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := env.Agent.Checkpoint(); err == nil && len(st.Allocations) >= n {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("checkpoint never reached %d attachments", n)
}

// assertNothingReleased fails if an ENI of before is gone or changed status
// or device, or lost an address. New addresses and ENIs are fine: the pool
// may have grown.
func assertNothingReleased(t *testing.T, source string, before, after map[string]harness.ENIState) {
	t.Helper()
	for id, b := range before {
		a, ok := after[id]
		if !ok {
			t.Errorf("%s: ENI %s is gone", source, id)
			continue
		}
		if a.Status != b.Status || a.DeviceIndex != b.DeviceIndex {
			t.Errorf("%s: ENI %s was %s at device %d, now %s at %d", source, id, b.Status, b.DeviceIndex, a.Status, a.DeviceIndex)
		}
		for _, addr := range b.Addresses {
			if !slices.Contains(a.Addresses, addr) {
				t.Errorf("%s: %s was released from ENI %s", source, addr, id)
			}
		}
	}
}
