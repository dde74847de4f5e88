package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/ratelimit"
)

// checkOutput is the part of `allotctl check -o json` the test reads.
type checkOutput struct {
	Agents   int `json:"agents"`
	Findings []struct {
		Class   string `json:"class"`
		Source  string `json:"source"`
		ENIID   string `json:"eni_id"`
		Address string `json:"address"`
		Detail  string `json:"detail"`
	} `json:"findings"`
	Fixes []struct {
		Fix     string `json:"fix"`
		Class   string `json:"class"`
		By      string `json:"by"`
		Applied bool   `json:"applied"`
		Result  string `json:"result"`
	} `json:"fixes"`
}

// classes counts the findings by class.
func (o checkOutput) classes() map[string]int {
	m := map[string]int{}
	for _, f := range o.Findings {
		m[f.Class]++
	}
	return m
}

// tryCheck runs the allotctl binary against the cluster and every agent;
// an error means the check could not run (exit 1).
func tryCheck(c *Cluster, extra ...string) (checkOutput, int, error) {
	var agents []string
	for _, n := range c.Nodes {
		agents = append(agents, n.Agent.Introspect)
	}
	cmd := exec.Command(c.cfg.Binaries.Ctl, append(append([]string{"--broker", c.Broker.Addr, "--timeout", "30s"},
		c.pki.ctlAdminArgs()...), append([]string{"check", "--agents", strings.Join(agents, ","), "-o", "json",
		"--agent-token-file=" + c.RepairTokenFile()}, extra...)...)...)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return checkOutput{}, 0, fmt.Errorf("allotctl check: %w", err)
	}
	var res checkOutput
	if err := json.Unmarshal(out, &res); err != nil {
		stderr := ""
		if ee != nil {
			stderr = string(ee.Stderr)
		}
		return res, code, fmt.Errorf("allotctl check (exit %d) printed no JSON: %w\n%s%s", code, err, out, stderr)
	}
	return res, code, nil
}

// inNodeNS runs f with a netlink handle in the node's namespace.
func inNodeNS(t *testing.T, n *Node, f func(h *netlink.Handle) error) {
	t.Helper()
	ns, err := netns.GetFromPath(n.NetNS)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := f(h); err != nil {
		t.Fatal(err)
	}
}

// TestCheckFindsInjectedDrift: a clean cluster checks clean (exit 0); then
// each kind of drift is made behind allot's back — an ENI tagged ours that
// etcd never heard of, an address assigned on an ENI directly in EC2,
// an address the broker records unassigned directly in EC2, a pod's host
// veth deleted, a veth of ours no pod owns — and `allotctl check` reports
// each by its class and exits 3.
func TestCheckFindsInjectedDrift(t *testing.T) {
	c := startCluster(t, testConfig(t, 2))
	addAll(t, c, 2, 4, "chk")
	eventually(t, 30*time.Second, "a clean cluster checks clean", func() error {
		res, code, err := tryCheck(c)
		if err != nil {
			return err
		}
		if code != 0 || len(res.Findings) > 0 || res.Agents != 2 {
			return fmt.Errorf("exit %d, %d agents, findings %+v", code, res.Agents, res.Findings)
		}
		return nil
	})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ec2c, err := ec2client.New(ctx, ec2client.Config{Region: "us-east-1", Endpoint: c.Sim.EC2Endpoint(),
		Limiter: ratelimit.New(ratelimit.Config{TimeScale: c.cfg.TimeScale})})
	if err != nil {
		t.Fatal(err)
	}
	node := c.Nodes[0]
	enis, err := node.Agent.ENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// An address of the node's pool that no pod holds, and its ENI.
	var freeENI, freeAddr string
	for _, e := range enis {
		for _, a := range e.Addresses {
			if a.State == "free" && freeAddr == "" {
				freeENI, freeAddr = e.ID, a.Addr
			}
		}
	}
	if freeAddr == "" {
		t.Fatalf("node %s has no free address to take away: %+v", node.Name, enis)
	}

	leak, err := ec2c.CreateENI(ctx, ec2client.CreateENIInput{SubnetID: node.SubnetID, Tags: map[string]string{
		ec2client.TagCluster: c.Prefix, ec2client.TagOwner: ec2client.OwnerValue,
		ec2client.TagCreatedAt: time.Now().UTC().Format(time.RFC3339)}})
	if err != nil {
		t.Fatal(err)
	}
	// Unassign first: the ENI may be full. EC2 hands out addresses
	// round the subnet, so the new one is not the one just freed.
	if err := ec2c.UnassignAddresses(ctx, freeENI, []string{freeAddr}, nil); err != nil {
		t.Fatal(err)
	}
	extra, err := ec2c.AssignAddresses(ctx, freeENI, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(extra) != 1 || extra[0] == freeAddr {
		t.Fatalf("EC2 assigned %v after %s was unassigned", extra, freeAddr)
	}
	podsOn, err := node.Agent.Pods(ctx)
	if err != nil || len(podsOn) == 0 {
		t.Fatalf("pods of %s: %v %v", node.Name, podsOn, err)
	}
	victim := podsOn[0].HostVeth
	stray := hostnet.VethPrefix + "0dd0dd0dd0d"
	inNodeNS(t, node, func(h *netlink.Handle) error {
		l, err := h.LinkByName(victim)
		if err != nil {
			return err
		}
		if err := h.LinkDel(l); err != nil {
			return err
		}
		return h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: stray}, PeerName: "chkpeer0"})
	})
	t.Cleanup(func() {
		inNodeNS(t, node, func(h *netlink.Handle) error {
			if l, err := h.LinkByName(stray); err == nil {
				return h.LinkDel(l)
			}
			return nil
		})
	})

	var res checkOutput
	var code int
	eventually(t, 20*time.Second, "the check runs after the drift", func() error {
		var err error
		res, code, err = tryCheck(c) // a lost EC2 answer fails one run (exit 1)
		return err
	})
	if code != 3 {
		t.Errorf("check exit %d after drift, want 3", code)
	}
	want := map[string]func(class, eni, addr, detail string) bool{
		"leaked-eni":          func(_, eni, _, _ string) bool { return eni == leak.ID },
		"address-drift/ec2":   func(_, eni, _, d string) bool { return eni == freeENI && strings.Contains(d, extra[0]) },
		"address-drift/etcd":  func(_, eni, _, d string) bool { return eni == freeENI && strings.Contains(d, freeAddr) },
		"pod-without-devices": func(_, _, _, _ string) bool { return true },
		"devices-without-pod": func(_, _, _, d string) bool { return strings.Contains(d, stray) },
	}
	for name, match := range want {
		class, _, _ := strings.Cut(name, "/")
		found := false
		for _, f := range res.Findings {
			if f.Class == class && match(f.Class, f.ENIID, f.Address, f.Detail) {
				found = true
			}
		}
		if !found {
			t.Errorf("check did not report %s; findings: %+v", name, res.Findings)
		}
	}
	repairDrift(t, c, node, victim, stray)
}

// repairDrift runs check --repair, first as the dry run it is by default
// (fixes named, nothing changed), then applied: the pod's deleted veth is
// back, the stray veth is gone, the re-check run after the fixes no longer
// reports either, and every pod of the node keeps its address. The EC2
// classes are named as the reconciler's to fix, not touched.
func repairDrift(t *testing.T, c *Cluster, node *Node, victim, stray string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := node.Agent.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dry, _, err := tryCheck(c, "--repair")
	if err != nil {
		t.Fatal(err)
	}
	fixes := map[string]bool{}
	for _, f := range dry.Fixes {
		fixes[f.Fix] = true
		if f.Applied {
			t.Errorf("dry run applied %+v", f)
		}
	}
	for _, want := range []string{"restore-pod-devices", "remove-stray-devices", "collect-leaked-eni"} {
		found := false
		for f := range fixes {
			found = found || strings.HasPrefix(f, want)
		}
		if !found {
			t.Errorf("dry run names no %s fix: %+v", want, dry.Fixes)
		}
	}
	if n := dry.classes(); n["pod-without-devices"] == 0 || n["devices-without-pod"] == 0 {
		t.Errorf("the dry run changed something: %v", n)
	}

	// A caller without the agents' token changes nothing.
	wrong := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrong, []byte(strings.Repeat("ab", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	refused, _, err := tryCheck(c, "--repair", "--dry-run=false", "--agent-token-file="+wrong)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range refused.Fixes {
		if f.By != "reconciler" && (f.Applied || !strings.Contains(f.Result, "wrong repair token")) {
			t.Errorf("fix with a wrong token: %+v", f)
		}
	}
	if n := refused.classes(); n["pod-without-devices"] == 0 || n["devices-without-pod"] == 0 {
		t.Errorf("a repair with a wrong token changed the host: %v", n)
	}

	applied, _, err := tryCheck(c, "--repair", "--dry-run=false")
	if err != nil {
		t.Fatal(err)
	}
	if n := applied.classes(); n["pod-without-devices"] > 0 || n["devices-without-pod"] > 0 {
		t.Errorf("after the repair the check still finds %v; fixes %+v", n, applied.Fixes)
	}
	for _, f := range applied.Fixes {
		if f.By != "reconciler" && !f.Applied {
			t.Errorf("fix not applied: %+v", f)
		}
	}
	inNodeNS(t, node, func(h *netlink.Handle) error {
		if _, err := h.LinkByName(victim); err != nil {
			return fmt.Errorf("the pod's veth %s is not back: %w", victim, err)
		}
		if _, err := h.LinkByName(stray); err == nil {
			return fmt.Errorf("the stray veth %s is still there", stray)
		}
		return nil
	})
	after, err := node.Agent.Pods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]string{}
	for _, p := range after {
		held[p.ContainerID] = p.Addr
	}
	for _, p := range before {
		if held[p.ContainerID] != p.Addr {
			t.Errorf("pod %s held %s before the repair, %q after", p.ContainerID, p.Addr, held[p.ContainerID])
		}
	}
}
