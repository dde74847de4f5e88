package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPodsReachEachOtherAndOutside runs pods on three t3.medium nodes (5
// pod addresses per ENI) in two subnets, with a warm target small enough
// that the burst needs secondary ENIs: every pod
// gets a unique address that EC2 has on its own node, reaches a pod on
// another node over TCP (through both nodes' host networking and the VPC
// router's source check), and reaches the outside host as its node's
// primary address (SNAT). CNI CHECK passes for every pod, also after a GC
// on one of the nodes. After DEL of
// every pod, nothing is left beyond the warm targets.
func TestPodsReachEachOtherAndOutside(t *testing.T) {
	cfg := testConfig(t, 3)
	cfg.InstanceType = "t3.medium"
	cfg.Warm = WarmTargets{WarmIPs: 2}
	c := startCluster(t, cfg)
	pods := addAll(t, c, 6, 0, "conn")
	requireOwned(t, c, pods)
	secondary := 0
	for _, f := range c.EC2Footprint() {
		secondary += len(f.ENIs) - 1
	}
	if secondary == 0 {
		t.Errorf("no secondary ENI attached: the burst should have needed one (pods on a secondary ENI use its route table)")
	}
	requireConnected(t, c, pods)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A GC on one node, as its runtime runs it, touches nothing of the
	// other nodes' pods: their CHECKs still find the ADD results their
	// runtimes cached.
	if err := c.GC(ctx, c.Nodes[0], pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := c.CheckPod(ctx, p); err != nil {
			t.Errorf("CHECK %s: %v", p, err)
		}
	}
	deleteAllAndWaitIdle(t, c, pods)
}

// TestDemoReport runs the demo at a small size and checks its report
// against what the cluster can be asked independently: every check passed,
// the figures count what was created, EC2 calls were made and counted, and
// `allotctl budgets` listed both subnets.
func TestDemoReport(t *testing.T) {
	requireCluster(t)
	cfg := DemoConfig{Cluster: testConfig(t, 2), PodsPerNode: 4, SettleTimeout: 2 * time.Minute}
	var progress bytes.Buffer
	rep, err := RunDemo(context.Background(), cfg, &progress)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, progress.String())
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !rep.Passed {
		t.Fatalf("demo checks failed:\n%s", text.String())
	}
	if rep.Pods != 8 || rep.PodsWithAddress != 8 || len(rep.PerNode) != 2 {
		t.Errorf("pods %d, with address %d, nodes %d; want 8, 8, 2", rep.Pods, rep.PodsWithAddress, len(rep.PerNode))
	}
	if rep.TimeToAddress.P50 <= 0 || rep.TimeToAddress.P99 < rep.TimeToAddress.P50 || rep.TimeToAddress.Max < rep.TimeToAddress.P99 {
		t.Errorf("time to address %+v is not ordered", rep.TimeToAddress)
	}
	if rep.ENIs < 2 || rep.Addresses < rep.PodsWithAddress {
		t.Errorf("peak footprint %d ENIs, %d addresses for %d pods", rep.ENIs, rep.Addresses, rep.PodsWithAddress)
	}
	// Joining fills each node's warm pool: the broker must have assigned
	// addresses, and nothing was throttled at this size.
	if rep.EC2Join.ByAction["AssignPrivateIpAddresses"]+rep.EC2Join.ByAction["CreateNetworkInterface"] == 0 {
		t.Errorf("no EC2 call filled the warm pools: %+v", rep.EC2Join)
	}
	var budgets []map[string]any
	if err := json.Unmarshal(rep.Budgets, &budgets); err != nil || len(budgets) != 2 {
		t.Errorf("budgets %s: %v, want 2 subnets", rep.Budgets, err)
	}
	if !strings.Contains(rep.BudgetsTable, "HEADROOM") {
		t.Errorf("budgets table:\n%s", rep.BudgetsTable)
	}
	var line bytes.Buffer
	if err := rep.WriteJSON(&line); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(line.String(), "\n"); n != 1 {
		t.Errorf("JSON report spans %d lines", n)
	}
	var back Report
	if err := json.Unmarshal(line.Bytes(), &back); err != nil || back.PodsWithAddress != 8 || !back.Passed {
		t.Errorf("JSON report does not read back: %v %+v", err, back)
	}
}
