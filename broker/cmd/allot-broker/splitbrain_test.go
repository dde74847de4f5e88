package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/splitguard"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

func mutatingCalls(sim *awssim.Sim) int64 {
	var n int64
	for action, c := range sim.Counters() {
		if !strings.HasPrefix(action, "Describe") {
			n += c.Calls
		}
	}
	return n
}

// TestTwoSeparateStatesRefuseLoudly is the misconfiguration a two-replica
// Deployment of brokers with default flags makes: each replica runs its own
// etcd member alone, so each elects itself. Broker A serves its node first;
// broker B, under the same cluster name with a state of its own, must find
// A's ENIs, send EC2 no mutating call at all although its own node asks for
// addresses, and say why in its log.
func TestTwoSeparateStatesRefuseLoudly(t *testing.T) {
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 10, Seed: 5, Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/24", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: 2}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	insts := sim.World().Instances()
	sec := newSecure(t, sim)
	common := []string{"--cluster", "prod", "--ec2-endpoint", sim.EC2Endpoint(), "--time-scale", "10", "--election-ttl", "2s"}
	common = append(common, sec.args(t)...)

	// A and its node: more addresses than the primary ENI holds (an
	// m5.large's has 9 free slots), so A creates an ENI, which carries A's
	// state's ID.
	a := startBroker(t, append([]string{"--name", "a", "--data-dir", filepath.Join(t.TempDir(), "a")}, common...)...)
	demand(t, ctx, a, sec.node(t, a, insts[0].ID), identityOf(insts[0]), 12)
	tagged := 0
	for _, e := range sim.World().AllNetworkInterfaces() {
		if e.Tags[splitguard.TagStoreID] != "" {
			tagged++
		}
	}
	if tagged == 0 {
		t.Fatal("broker A created no ENI tagged with its store ID")
	}

	// A is frozen while B runs: awssim counts calls for the whole account,
	// and A may still release its node's excess after the cooldown, which
	// would be counted against B. A's ENIs stay in EC2, tagged with its
	// state's ID, which is all B must see.
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
	time.Sleep(500 * time.Millisecond) // a request A had sent is answered and counted

	// B: its own etcd, the same cluster name, a node that wants addresses.
	before := mutatingCalls(sim)
	b := startBroker(t, append([]string{"--name", "b", "--data-dir", filepath.Join(t.TempDir(), "b")}, common...)...)
	bc := sec.admin(t, b)
	eventually(t, "broker b leads its own state", func() error {
		l, err := leaderOf(ctx, bc)
		if err == nil && l != "b" {
			err = fmt.Errorf("leader %q", l)
		}
		return err
	})
	node := allotv1.NewNodeServiceClient(sec.node(t, b, insts[1].ID))
	if _, err := node.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(insts[1])}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: insts[1].ID, Pending: 4}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "broker b says why it refuses", func() error {
		if !strings.Contains(b.logText(), "split brain") {
			return fmt.Errorf("no split-brain error in b's log yet")
		}
		return nil
	})
	time.Sleep(3 * time.Second) // B's engine would have planned and called by now
	if after := mutatingCalls(sim); after != before {
		t.Fatalf("broker B sent %d mutating EC2 calls with another state's ENIs in the cluster", after-before)
	}
	log := b.logText()
	for _, want := range []string{"refusing to change EC2", splitguard.TagStoreID, "--etcd-initial-cluster"} {
		if !strings.Contains(log, want) {
			t.Errorf("b's log does not say %q:\n%s", want, log)
		}
	}
	// A, whose ENIs these are, goes on.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(a.logText(), "split brain") {
		t.Errorf("broker A refused its own ENIs:\n%s", a.logText())
	}
}

// demand registers a node with broker p over the node's connection conn,
// asks for n addresses and waits until the broker delivered them.
func demand(t *testing.T, ctx context.Context, p *proc, conn *grpc.ClientConn, ident *allotv1.NodeIdentity, n int) {
	t.Helper()
	id := ident.GetInstanceId()
	node := allotv1.NewNodeServiceClient(conn)
	if _, err := node.Register(ctx, &allotv1.RegisterRequest{Node: ident}); err != nil {
		t.Fatal(err)
	}
	w, err := node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: id, Pending: int32(n)}); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < n; {
		ev, err := w.Recv()
		if err != nil {
			t.Fatalf("%s: watch: %v\n%s", id, err, p.logText())
		}
		got = 0
		for _, e := range ev.GetEnis() {
			got += len(e.GetAddresses())
		}
	}
}
