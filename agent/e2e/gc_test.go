package e2e_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/allotnet/allot/agent/e2e/harness"
	"github.com/allotnet/allot/agent/hostnet"
)

// TestGC: GC with cni.dev/valid-attachments removes exactly the
// attachments not listed — those the runtime knows (libcni DELs them
// first), one only the agent knows (added by a runtime that lost its
// cache), and a stray veth of ours no record accounts for — and leaves the
// valid pods and devices that are not the agent's alone.
func TestGC(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 10, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, 2*time.Minute)
	pods := newPods(t, "gc", 6)
	addrs := addAll(t, ctx, env.Runtime, pods, 6)

	// A runtime whose cache was lost: its pod is known to the agent only.
	forgetful := harness.NewRuntime(t, bins.Dir, env.Runtime.List, nil)
	orphan := harness.NewPod(t, "e2e", "orphan")
	res, err := forgetful.Add(ctx, orphan)
	if err != nil {
		t.Fatal(err)
	}
	orphanAddr := resultAddr(t, res)

	// A stray veth of ours (named and stamped as the agent does) with no
	// record, and a foreign veth that is not the agent's business.
	strayNS := harness.NewNetNS(t, "stray")
	strayAtt := hostnet.Attachment{Network: harness.Network, ContainerID: "5742a700000000000000000000000001", IfName: "eth0"}
	stray := hostnet.HostVethName(strayAtt)
	addVeth(t, env.Node.NS, stray, "allot/"+strayAtt.String(), strayNS)
	addVeth(t, env.Node.NS, "e2e-foreign", "", strayNS)

	valid := pods[:3]
	if err := env.Runtime.GC(ctx, valid); err != nil {
		t.Fatalf("GC: %v", err)
	}

	recs := agreement(t, ctx, env)
	want := harness.Records{}
	kept := map[*harness.Pod]bool{}
	for _, p := range valid {
		want[harness.Key(harness.Network, p)] = addrs[p]
		kept[p] = true
	}
	for _, d := range harness.Diff("checkpoint after GC", recs, "the valid list", want) {
		t.Error(d)
	}
	for _, p := range valid {
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK of valid %s after GC: %v", p, err)
		}
	}
	wired := map[*harness.Pod]netip.Addr{}
	for p, a := range addrs {
		if kept[p] {
			wired[p] = a
		}
	}
	verifyWired(t, env, wired)
	gone := map[*harness.Pod]netip.Addr{orphan: orphanAddr}
	for p, a := range addrs {
		if !kept[p] {
			gone[p] = a
		}
	}
	host, err := harness.InspectHost(env.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range gone {
		for _, bad := range harness.VerifyGone(host, harness.Network, p, a) {
			t.Errorf("GC left %s: %s", p, bad)
		}
	}
	if _, err := env.Node.NS.NL.LinkByName(stray); err == nil {
		t.Errorf("GC left the stray veth %s", stray)
	}
	if _, err := env.Node.NS.NL.LinkByName("e2e-foreign"); err != nil {
		t.Errorf("GC removed a veth that is not the agent's: %v", err)
	}
}

// addVeth creates a veth in node named name (with alias, if set) whose peer
// sits in peerNS.
func addVeth(t *testing.T, node *harness.NetNS, name, alias string, peerNS *harness.NetNS) {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "p" + name[len(name)-6:],
		PeerNamespace: netlink.NsFd(int(peerNS.Handle()))}
	if err := node.NL.LinkAdd(v); err != nil {
		t.Fatalf("create veth %s: %v", name, err)
	}
	l, err := node.NL.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if alias != "" {
		if err := node.NL.LinkSetAlias(l, alias); err != nil {
			t.Fatal(err)
		}
	}
	if err := node.NL.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
}
