package e2e_test

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/e2e/harness"
	"github.com/allotnet/allot/cni/plugin"
)

// lifecycleAgent: a small warm pool, so the 50 ADDs outrun it and wait for
// the broker's deliveries as well as take from the pool.
var lifecycleAgent = harness.AgentConfig{WarmIPs: 5, Cooldown: 200 * time.Millisecond}

// TestPodLifecycle: 50 ADDs through the plugin binary give 50 distinct
// addresses, each assigned in EC2 to an ENI of the node, each pod wired on
// both sides as recorded; CHECK passes, and fails once a route is removed;
// DEL removes everything ADD added, and a second DEL succeeds and changes
// nothing; addresses DEL freed stay with the node (EC2 still has them).
func TestPodLifecycle(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: lifecycleAgent})
	ctx := ctxFor(t, 3*time.Minute)
	pods := newPods(t, "web", 50)

	addrs := addAll(t, ctx, env.Runtime, pods, 8)
	if len(addrs) != 50 {
		t.Fatalf("%d pods got an address, want 50", len(addrs))
	}
	distinct(t, addrs)
	verifyWired(t, env, addrs)
	secondary := 0
	for _, a := range addrs {
		if _, dev, _ := env.Cloud.OwnerOf(a); dev > 0 {
			secondary++
		}
	}
	if secondary == 0 {
		t.Error("no pod is on a secondary ENI; 50 pods can't fit on a c5.xlarge's primary ENI")
	}
	if recs := agreement(t, ctx, env); len(recs) != 50 {
		t.Errorf("checkpoint holds %d attachments, want 50", len(recs))
	}
	if err := env.Node.Err(); err != nil {
		t.Fatal(err)
	}

	for _, p := range pods {
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s: %v", p, err)
		}
	}

	// A missing host route: the pod is unreachable, and CHECK must say so.
	broken := pods[0]
	hostVeth, err := env.Node.NS.NL.LinkByName(harness.HostVethName(harness.Network, broken))
	if err != nil {
		t.Fatal(err)
	}
	route := &netlink.Route{LinkIndex: hostVeth.Attrs().Index, Table: unix.RT_TABLE_MAIN,
		Dst: &net.IPNet{IP: addrs[broken].AsSlice(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}
	if err := env.Node.NS.NL.RouteDel(route); err != nil {
		t.Fatalf("remove %s's host route: %v", broken, err)
	}
	err = env.Runtime.Check(ctx, broken)
	if cniCode(err) != plugin.CodeCheckFailed || !strings.Contains(err.Error(), addrs[broken].String()) {
		t.Errorf("CHECK %s without its host route: %v, want code %d naming %s", broken, err, plugin.CodeCheckFailed, addrs[broken])
	}
	// The pod side too: the default route.
	broken2 := pods[1]
	eth0, err := broken2.NS.NL.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	def := &netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: harness.PodGateway.AsSlice(),
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	if err := broken2.NS.NL.RouteDel(def); err != nil {
		t.Fatalf("remove %s's default route: %v", broken2, err)
	}
	if err := env.Runtime.Check(ctx, broken2); cniCode(err) != plugin.CodeCheckFailed || !strings.Contains(err.Error(), "default") {
		t.Errorf("CHECK %s without its default route: %v, want code %d naming the default route", broken2, err, plugin.CodeCheckFailed)
	}
	if err := env.Runtime.Check(ctx, pods[2]); err != nil {
		t.Errorf("CHECK of an intact pod after breaking others: %v", err)
	}

	before := env.Cloud.Assigned(t)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if err := env.Runtime.Del(ctx, p); err != nil {
				t.Errorf("DEL %s: %v", p, err)
			}
		})
	}
	wg.Wait()
	assertAllGone(t, env, addrs)
	if recs := agreement(t, ctx, env); len(recs) != 0 {
		t.Errorf("checkpoint holds %v after every DEL", recs)
	}

	// DEL is idempotent: again, for every pod, and nothing changes.
	for _, p := range pods {
		if err := env.Runtime.Del(ctx, p); err != nil {
			t.Errorf("second DEL %s: %v", p, err)
		}
	}
	assertAllGone(t, env, addrs)
	after := env.Cloud.Assigned(t)
	for eni, st := range before {
		for _, a := range st.Addresses {
			if !slices.Contains(after[eni].Addresses, a) {
				t.Errorf("DEL gave %s of %s back to EC2; freed pod addresses stay in the node's pool", a, eni)
			}
		}
	}
}

// assertAllGone checks nothing of the pods' networks is left: no host veth,
// route or rule, and no interface in the pod namespaces.
func assertAllGone(t *testing.T, env *harness.Env, addrs map[*harness.Pod]netip.Addr) {
	t.Helper()
	waitTornDown(t, env)
	host, err := harness.InspectHost(env.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range addrs {
		for _, bad := range harness.VerifyGone(host, harness.Network, p, a) {
			t.Errorf("after DEL of %s: %s", p, bad)
		}
		ps, err := harness.InspectPod(p)
		if err != nil {
			t.Fatal(err)
		}
		if ps.Exists {
			t.Errorf("after DEL of %s: the pod still has eth0 (%v)", p, ps.Addrs)
		}
	}
	if len(host.Veths) != 0 || len(host.ToPod) != 0 || len(host.FromPod) != 0 {
		t.Errorf("after every DEL the node still has veths %v, to-rules %v, from-rules %v", host.Wiring(), host.ToPod, host.FromPod)
	}
}
