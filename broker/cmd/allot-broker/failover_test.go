package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/splitguard"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/freeport"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

func freePort(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// haSet is three allot-broker processes whose embedded etcd members form
// one cluster on loopback, with peer TLS, as a three-replica StatefulSet
// would.
type haSet struct {
	args    [3][]string
	procs   [3]*proc
	metrics [3]string // each one's --metrics-addr: /healthz, /readyz
}

func newHASet(t *testing.T, common []string) *haSet {
	t.Helper()
	dir := t.TempDir()
	// The members speak mutual TLS to each other, as the StatefulSet's do.
	ca, err := devca.New("allot etcd peers")
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCert(dir, "peer-ca")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Peer("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := leaf.Write(dir, "peer")
	if err != nil {
		t.Fatal(err)
	}
	common = append(common, "--etcd-peer-cert", cert, "--etcd-peer-key", key, "--etcd-peer-ca", caFile)
	var members []string
	for i := range 3 {
		members = append(members, fmt.Sprintf("broker-%d=https://%s", i, freePort(t)))
	}
	h := &haSet{}
	for i := range 3 {
		h.metrics[i] = freePort(t)
		h.args[i] = append([]string{
			"--name", fmt.Sprintf("broker-%d", i), "--data-dir", filepath.Join(dir, fmt.Sprint(i)),
			"--etcd-initial-cluster", strings.Join(members, ","), "--etcd-client-url", "http://" + freePort(t),
			"--metrics-addr", h.metrics[i],
		}, common...)
	}
	for i := range 3 {
		h.procs[i] = spawnBroker(t, h.args[i]...)
	}
	for _, p := range h.procs {
		p.waitServing(t)
	}
	return h
}

func (h *haSet) index(name string) int {
	for i := range h.procs {
		if name == fmt.Sprintf("broker-%d", i) {
			return i
		}
	}
	return -1
}

// firstMutationAfter polls awssim's counters until more than base
// mutating calls were made, and says when it saw that.
func firstMutationAfter(sim *awssim.Sim, base int64, within time.Duration) (time.Time, bool) {
	start := time.Now()
	for time.Since(start) < within {
		if mutatingCalls(sim) > base {
			return time.Now(), true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Time{}, false
}

// TestThreeBrokersFailoverQuorumLossAndRecovery: three broker processes on
// one embedded etcd cluster. Killing the leader with SIGKILL, a standby
// mutates EC2 within 10 s and no intent is carried out twice; with two of
// three killed no broker mutates EC2 and demand cannot even be recorded;
// with one back, the work resumes and every node gets what it asked for.
func TestThreeBrokersFailoverQuorumLossAndRecovery(t *testing.T) {
	const nodes = 6
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 10, Seed: 7, Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/22", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: nodes}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	sec := newSecure(t, sim)
	// The election TTL is left at its default: the failover figure is the
	// one an installation with default flags gets.
	common := append([]string{"--cluster", "ha3", "--ec2-endpoint", sim.EC2Endpoint(), "--time-scale", "10",
		"--log-level", "info"}, sec.args(t)...)
	h := newHASet(t, common)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()

	leaderVia := func(via int) (string, error) {
		cctx, c := context.WithTimeout(ctx, 2*time.Second)
		defer c()
		l, err := leaderOf(cctx, sec.admin(t, h.procs[via]))
		if err == nil && l == "" {
			err = fmt.Errorf("no leader")
		}
		return l, err
	}
	var lead string
	eventually(t, "one leader for the three", func() error {
		var err error
		if lead, err = leaderVia(0); err != nil {
			return err
		}
		for i := 1; i < 3; i++ {
			if l, err := leaderVia(i); err != nil || l != lead {
				return fmt.Errorf("broker-%d sees leader %q (%v), broker-0 sees %q", i, l, err, lead)
			}
		}
		return nil
	})
	for i := range 3 {
		wantProbes(t, h.metrics[i], http.StatusOK, http.StatusOK)
	}
	li := h.index(lead)
	standby := (li + 1) % 3
	t.Logf("leader %s; agents talk to broker-%d", lead, standby)

	// Phase 1: demand for every node through a standby; kill the leader as
	// soon as it starts calling EC2.
	insts := sim.World().Instances()
	want := map[string]int{}
	state := func(via *proc, i, n int) error {
		node := allotv1.NewNodeServiceClient(sec.node(t, via, insts[i].ID))
		cctx, c := context.WithTimeout(ctx, 3*time.Second)
		defer c()
		if _, err := node.Register(cctx, &allotv1.RegisterRequest{Node: identityOf(insts[i])}); err != nil {
			return err
		}
		_, err := node.SetDemand(cctx, &allotv1.SetDemandRequest{InstanceId: insts[i].ID, Pending: int32(n)})
		return err
	}
	for i := range nodes / 2 {
		want[insts[i].ID] = 12 // more than the primary ENI holds: creates, attaches, assigns
		if err := state(h.procs[standby], i, 12); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := firstMutationAfter(sim, 0, 30*time.Second); !ok {
		t.Fatal("the leader made no mutating call for the stated demand")
	}
	killed := time.Now()
	_ = h.procs[li].signal(t, syscall.SIGKILL)
	time.Sleep(200 * time.Millisecond) // calls already on the wire arrive
	base := mutatingCalls(sim)
	seen, ok := firstMutationAfter(sim, base, 20*time.Second)
	took := seen.Sub(killed)
	if !ok {
		t.Fatalf("no standby mutated EC2 within 20 s of the leader's SIGKILL")
	}
	t.Logf("figure: first mutating EC2 call %.2fs after SIGKILL of the leader (default election TTL %s)", took.Seconds(), leader.DefaultTTL)
	if took > 10*time.Second {
		t.Errorf("failover took %v, want at most 10 s", took)
	}
	waitDelivered(t, ctx, sec, h.procs[standby], insts[:nodes/2], want)
	checkNothingTwice(t, sim, "ha3")

	// Phase 2: kill the new leader too: one of three left, no quorum.
	var newLead string
	eventually(t, "a new leader", func() error {
		var err error
		newLead, err = leaderVia(standby)
		return err
	})
	survivor := -1
	for i := range 3 {
		if i != li && fmt.Sprintf("broker-%d", i) != newLead {
			survivor = i
		}
	}
	if survivor < 0 {
		survivor = (li + 2) % 3
	}
	second := 3 - li - survivor
	_ = h.procs[second].signal(t, syscall.SIGKILL)
	time.Sleep(leader.DefaultTTL + time.Second) // past the election TTL: nobody may lead now
	base = mutatingCalls(sim)
	refused := 0
	for i := nodes / 2; i < nodes; i++ {
		want[insts[i].ID] = 12
		if err := state(h.procs[survivor], i, 12); err != nil {
			refused++ // the agent keeps the demand and states it again
		}
	}
	if _, ok := firstMutationAfter(sim, base, 5*time.Second); ok {
		t.Fatalf("a mutating EC2 call with one of three brokers alive (%d since the quorum loss)", mutatingCalls(sim)-base)
	}
	t.Logf("figure: quorum lost: 0 mutating EC2 calls in 5 s; %d of %d demands could not be recorded", refused, nodes/2)
	// The survivor is alive (no restart) but not ready (no quorum).
	wantProbes(t, h.metrics[survivor], http.StatusOK, http.StatusServiceUnavailable)

	// Phase 3: the leader killed first comes back on its data.
	h.procs[li] = spawnBroker(t, h.args[li]...)
	h.procs[li].waitServing(t)
	eventually(t, "demand recorded again", func() error {
		for i := nodes / 2; i < nodes; i++ {
			if err := state(h.procs[survivor], i, 12); err != nil {
				return err
			}
		}
		return nil
	})
	waitDelivered(t, ctx, sec, h.procs[survivor], insts, want)
	checkNothingTwice(t, sim, "ha3")
	logCallsAndIntents(t, sim, h.args[survivor])
}

// logCallsAndIntents logs the EC2 calls by action beside the intents the
// brokers recorded (read from the member broker args name), by kind and
// state, and fails if an intent is still open.
func logCallsAndIntents(t *testing.T, sim *awssim.Sim, args []string) {
	t.Helper()
	var actions []string
	calls := map[string]int64{}
	for a, c := range sim.Counters() {
		actions = append(actions, fmt.Sprintf("%s=%d", a, c.Calls))
		calls[a] = c.Calls
	}
	sort.Strings(actions)
	t.Logf("figure: EC2 calls by action: %s", strings.Join(actions, " "))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{argAfter(args, "--etcd-client-url")}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	st, err := store.Open(cli, "ha3")
	if err != nil {
		t.Fatal(err)
	}
	// The wanted addresses may arrive while the leader still adds warm
	// capacity beyond them (another ENI being attached): every intent
	// must close, not at once.
	var intents []store.Intent
	eventually(t, "every intent closed", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if intents, err = st.ListIntents(ctx); err != nil {
			return err
		}
		for _, in := range intents {
			if in.State != store.IntentDone && in.State != store.IntentFailed {
				return fmt.Errorf("intent %s (%s on %s) is still %s", in.ID, in.Kind, in.InstanceID, in.State)
			}
		}
		return nil
	})
	byKind := map[string]int{}
	var kinds []string
	for _, in := range intents {
		k := in.Kind + "/" + in.State
		if byKind[k] == 0 {
			kinds = append(kinds, k)
		}
		byKind[k]++
	}
	sort.Strings(kinds)
	var figs []string
	for _, k := range kinds {
		figs = append(figs, fmt.Sprintf("%s=%d", k, byKind[k]))
	}
	t.Logf("figure: %d intents by kind/state: %s", len(intents), strings.Join(figs, " "))
	// A create left open by the killed leader is resolved by repeating its
	// ClientToken, which EC2 answers with the same ENI: one more call, not
	// one more ENI (checkNothingTwice counts those).
	t.Logf("figure: %d CreateNetworkInterface calls for %d create intents",
		calls["CreateNetworkInterface"], byKind[store.IntentCreate+"/"+store.IntentDone]+byKind[store.IntentCreate+"/"+store.IntentFailed])
}

// argAfter is the value following name in args.
func argAfter(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// waitDelivered waits until every node in insts holds want addresses.
func waitDelivered(t *testing.T, ctx context.Context, sec *secure, p *proc, insts []world.Instance, want map[string]int) {
	t.Helper()
	for _, inst := range insts {
		w, err := allotv1.NewNodeServiceClient(sec.node(t, p, inst.ID)).WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: inst.ID})
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < want[inst.ID]; {
			ev, err := w.Recv()
			if err != nil {
				t.Fatalf("%s: watch: %v", inst.ID, err)
			}
			n = 0
			for _, e := range ev.GetEnis() {
				n += len(e.GetAddresses())
			}
		}
	}
}

// checkNothingTwice: each ENI of the cluster was created once (one ENI per
// intent's client token), carries this state's ID, and is attached.
func checkNothingTwice(t *testing.T, sim *awssim.Sim, cluster string) {
	t.Helper()
	tokens := map[string]string{}
	enis := 0
	for _, e := range sim.World().AllNetworkInterfaces() {
		if e.Tags[ec2client.TagCluster] != cluster {
			continue
		}
		enis++
		tok := e.Tags[executor.TagClientToken]
		if prev, dup := tokens[tok]; dup && tok != "" {
			t.Errorf("ENIs %s and %s were created for one intent (token %s)", prev, e.ID, tok)
		}
		tokens[tok] = e.ID
		if e.Tags[splitguard.TagStoreID] == "" {
			t.Errorf("ENI %s carries no store ID", e.ID)
		}
	}
	creates := sim.Counters()["CreateNetworkInterface"].Calls
	t.Logf("figure: %d ENIs of the cluster from %d CreateNetworkInterface calls", enis, creates)
}
