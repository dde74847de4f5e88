package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/splitguard"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestBackupAndRestore follows the operations guide's etcd backup and
// restore: a snapshot of a running broker's embedded member (what
// `etcdctl snapshot save` does: the Maintenance Snapshot call), restored
// with etcd's own restore (what `etcdutl snapshot restore --name
// --initial-cluster --initial-cluster-token --initial-advertise-peer-urls
// --data-dir` does) into a new data directory, with the member name, peer
// URL and the allot-<cluster> token the broker bootstraps with. A broker
// started on it has every record, and its leader goes on changing EC2:
// the state's ID came back with the snapshot, so the split-brain guard
// knows the ENIs as its own.
func TestBackupAndRestore(t *testing.T) {
	const cluster = "bk"
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 10, Seed: 9, Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/22", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: 1}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	sec := newSecure(t, sim)
	dir := t.TempDir()
	peer, client := "http://"+freePort(t), "http://"+freePort(t)
	member := func(dataDir string) []string {
		return append([]string{"--name", "broker-0", "--cluster", cluster, "--data-dir", dataDir,
			"--etcd-name", "broker-0", "--etcd-initial-cluster", "broker-0=" + peer, "--etcd-client-url", client,
			"--ec2-endpoint", sim.EC2Endpoint(), "--time-scale", "10"}, sec.args(t)...)
	}
	inst := sim.World().Instances()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	// A broker with a node whose demand made it create an ENI.
	p := startBroker(t, member(filepath.Join(dir, "data"))...)
	state := func(p *proc, pending int) {
		node := allotv1.NewNodeServiceClient(sec.node(t, p, inst.ID))
		eventually(t, "demand recorded", func() error {
			cctx, c := context.WithTimeout(ctx, 3*time.Second)
			defer c()
			if _, err := node.Register(cctx, &allotv1.RegisterRequest{Node: identityOf(inst), NodeName: "node-a"}); err != nil {
				return err
			}
			_, err := node.SetDemand(cctx, &allotv1.SetDemandRequest{InstanceId: inst.ID, Pending: int32(pending)})
			return err
		})
	}
	state(p, 12)
	waitDelivered(t, ctx, sec, p, sim.World().Instances(), map[string]int{inst.ID: 12})
	before := listENIs(t, ctx, sec, p)

	// Snapshot the running member, as etcdctl snapshot save does.
	snap := filepath.Join(dir, "allot.db")
	saveSnapshot(t, ctx, client, snap)
	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("broker exit: %v", err)
	}

	// Restore into a new data directory, as etcdutl snapshot restore does.
	restored := filepath.Join(dir, "restored")
	if err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snap, Name: "broker-0", OutputDataDir: restored, PeerURLs: []string{peer},
		InitialCluster: "broker-0=" + peer, InitialClusterToken: "allot-" + cluster,
	}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := os.Stat(filepath.Join(restored, "member")); err != nil {
		t.Fatalf("the restore made no member directory under the data directory: %v", err)
	}

	// A broker on the restored data: same records, and work goes on.
	base := mutatingCalls(sim)
	p = startBroker(t, member(restored)...)
	after := listENIs(t, ctx, sec, p)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("ENI records after restore %v, before %v", after, before)
	}
	nodes, err := allotv1.NewAdminServiceClient(sec.admin(t, p)).ListNodes(ctx, &allotv1.ListNodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 1 || nodes.GetNodes()[0].GetNodeName() != "node-a" {
		t.Fatalf("nodes after restore: %v, %v", nodes, err)
	}
	state(p, 20)
	waitDelivered(t, ctx, sec, p, sim.World().Instances(), map[string]int{inst.ID: 20})
	if mutatingCalls(sim) == base {
		t.Fatal("no mutating EC2 call after the restore")
	}
	for _, e := range sim.World().AllNetworkInterfaces() {
		if id := e.Tags[splitguard.TagStoreID]; e.Tags[ec2client.TagCluster] == cluster && id == "" {
			t.Errorf("ENI %s carries no store ID", e.ID)
		}
	}
	t.Logf("figure: %d ENIs recorded before the snapshot, the same after the restore; %d mutating EC2 calls after it",
		len(before), mutatingCalls(sim)-base)
}

// saveSnapshot streams the member's snapshot into path.
func saveSnapshot(t *testing.T, ctx context.Context, endpoint, path string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// listENIs is the broker's ENI records as "instance/eni:addresses".
func listENIs(t *testing.T, ctx context.Context, sec *secure, p *proc) []string {
	t.Helper()
	resp, err := allotv1.NewAdminServiceClient(sec.admin(t, p)).ListENIs(ctx, &allotv1.ListENIsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ne := range resp.GetEnis() {
		out = append(out, fmt.Sprintf("%s/%s:%d", ne.GetInstanceId(), ne.GetEni().GetEniId(), len(ne.GetEni().GetAddresses())))
	}
	return out
}
