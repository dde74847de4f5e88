package cluster

import (
	"bytes"
	"context"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ec2client"
)

// TestCustomNetworkingLayoutIsTheShippedScenario keeps the harness's
// custom-networking VPC the one deploy/awssim/custom-networking.yaml
// describes, which awssim's own data-plane test runs.
func TestCustomNetworkingLayoutIsTheShippedScenario(t *testing.T) {
	sc, err := scenario.Load(filepath.Join(filepath.Dir(conflistPath(t)), "..", "awssim", "custom-networking.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.VPCs) != 1 {
		t.Fatalf("scenario file has %d VPCs, want 1", len(sc.VPCs))
	}
	want, got := sc.VPCs[0], customNetworkingVPC()
	if !slices.Equal(got.CIDRs, want.CIDRs) {
		t.Errorf("CIDRs %v, the file has %v", got.CIDRs, want.CIDRs)
	}
	if !slices.Equal(got.SecurityGroups, want.SecurityGroups) {
		t.Errorf("security groups %v, the file has %v", got.SecurityGroups, want.SecurityGroups)
	}
	if !reflect.DeepEqual(got.Subnets, want.Subnets) {
		t.Errorf("subnets\n %+v\nthe file has\n %+v", got.Subnets, want.Subnets)
	}
}

// TestCustomNetworkingDemo runs `demo --custom-networking` small: two
// nodes in two zones, three pods each. The demo's own checks must pass
// (pod to pod across nodes and subnets, each pod seen by the other as its
// own address, SNAT to the outside host as the node's primary address,
// nothing leaked after DEL, `allotctl check` clean); while the pods run,
// the test asks the EC2 API itself where their addresses are: inside the
// zone's pod subnets of 100.64.0.0/16, never the node's subnet, on ENIs
// allot created there with the pod network's security groups. It runs in
// both address modes: /28 prefixes come from the pod subnets too.
func TestCustomNetworkingDemo(t *testing.T) {
	for _, mode := range []string{ModeSecondaryIP, ModePrefix} {
		t.Run(mode, func(t *testing.T) { customNetworkingDemo(t, mode) })
	}
}

func customNetworkingDemo(t *testing.T, mode string) {
	requireCluster(t)
	t0 := time.Now()
	cfg := DemoConfig{Cluster: testConfig(t, 2), PodsPerNode: 3, SettleTimeout: time.Minute}
	cfg.Cluster.CustomNetworking, cfg.Cluster.Mode = true, mode
	peakSeen := false
	cfg.AtPeak = func(ctx context.Context, c *Cluster, pods []*Pod) {
		peakSeen = true
		startedMu.Lock()
		started = append(started, c.Prefix)
		startedMu.Unlock()
		requirePodSubnets(t, ctx, c, pods)
	}
	var progress bytes.Buffer
	rep, err := RunDemo(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, progress.String())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	t.Logf("demo report (%.1f s):\n%s", time.Since(t0).Seconds(), text.String())
	if !rep.Passed || !peakSeen {
		t.Fatalf("demo checks failed (at peak: %v)", peakSeen)
	}
	seen := false
	for _, ch := range rep.Checks {
		seen = seen || (ch.OK && strings.Contains(ch.Name, "sees the other's own address"))
	}
	if !seen {
		t.Errorf("no passed check that pods see each other's own addresses: %+v", rep.Checks)
	}
	if len(rep.Origins) != 6 || len(rep.PodNetworks) != 2 {
		t.Errorf("%d address origins, %d pod networks; want 6 and 2", len(rep.Origins), len(rep.PodNetworks))
	}
	for _, want := range []string{"pods-us-east-1a", "pods-us-east-1b"} {
		if !bytes.Contains([]byte(rep.PodNetworksTable), []byte(want)) {
			t.Errorf("allotctl pod-networks list lacks %s:\n%s", want, rep.PodNetworksTable)
		}
	}
}

// requirePodSubnets asks the EC2 API, as a client of its own, where every
// pod's address is and checks it against the layout.
func requirePodSubnets(t *testing.T, ctx context.Context, c *Cluster, pods []*Pod) {
	t.Helper()
	ec2c, err := ec2client.New(ctx, ec2client.Config{Region: "us-east-1", Endpoint: c.Sim.EC2Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	subnets, err := ec2c.DescribeSubnets(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]ec2client.SubnetInfo{}
	for _, s := range subnets {
		byID[s.ID] = s
	}
	podSubnetsOf := map[string][]string{} // zone -> IDs, from the names the layout gave them
	for _, sn := range podSubnets {
		id, _ := scenario.SubnetID(c.Sim.World(), sn.Name)
		podSubnetsOf[sn.AZ] = append(podSubnetsOf[sn.AZ], id)
	}
	holder := map[string]ec2client.ENIInfo{}
	for _, n := range c.Nodes {
		if !netip.MustParsePrefix("10.0.0.0/16").Contains(n.PrimaryIP) {
			t.Errorf("%s primary address %s is outside 10.0.0.0/16", n.Name, n.PrimaryIP)
		}
		enis, err := ec2c.DescribeENIs(ctx, ec2client.DescribeENIsInput{InstanceID: n.InstanceID})
		if err != nil {
			t.Fatal(err)
		}
		zone := byID[n.SubnetID].AZ
		for _, e := range enis {
			for _, a := range e.Addresses {
				holder[a] = e
			}
			for _, pfx := range e.Prefixes {
				for a, p := netip.MustParsePrefix(pfx).Addr(), netip.MustParsePrefix(pfx); p.Contains(a); a = a.Next() {
					holder[a.String()] = e
				}
			}
			if e.Tags[ec2client.TagCluster] != c.Prefix {
				continue // the primary ENI, the instance's own
			}
			if !slices.Contains(podSubnetsOf[zone], e.SubnetID) {
				t.Errorf("ENI %s of %s (zone %s) is in %s, want one of %v", e.ID, n.Name, zone, e.SubnetID, podSubnetsOf[zone])
			}
			if want := []string{podSecurityGroups[zone]}; !slices.Equal(e.SecurityGroups, want) {
				t.Errorf("ENI %s of %s has security groups %v, want the pod network's %v", e.ID, n.Name, e.SecurityGroups, want)
			}
		}
	}
	for _, p := range pods {
		e, ok := holder[p.Addr.String()]
		if !ok {
			t.Errorf("%s: no ENI of %s holds %s", p.Name, p.Node.Name, p.Addr)
			continue
		}
		node, pod := byID[p.Node.SubnetID], byID[e.SubnetID]
		if netip.MustParsePrefix(node.CIDR).Contains(p.Addr) || !netip.MustParsePrefix("100.64.0.0/16").Contains(p.Addr) {
			t.Errorf("%s: %s (ENI %s, subnet %s %s) is not in the pod CIDR but in or beside the node subnet %s",
				p.Name, p.Addr, e.ID, e.SubnetID, pod.CIDR, node.CIDR)
		}
		if !netip.MustParsePrefix(pod.CIDR).Contains(p.Addr) || !slices.Contains(podSubnetsOf[node.AZ], e.SubnetID) {
			t.Errorf("%s: %s is on ENI %s in %s (%s), want a pod subnet of %s %v", p.Name, p.Addr, e.ID, e.SubnetID, pod.CIDR,
				node.AZ, podSubnetsOf[node.AZ])
		}
	}
}
