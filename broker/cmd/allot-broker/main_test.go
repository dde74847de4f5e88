package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// brokerBin is the allot-broker binary, built once by TestMain.
var brokerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "allot-broker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "allot-broker")
	if out, err := exec.Command("go", "build", "-o", brokerBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build allot-broker: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running allot-broker with its log.
type proc struct {
	cmd   *exec.Cmd
	addr  string
	addrC chan string
	done  chan error

	mu  sync.Mutex
	log bytes.Buffer
}

var servingRe = regexp.MustCompile(`msg="serving gRPC" addr=(\S+)`)

// startBroker runs the binary and waits for it to log its address.
func startBroker(t *testing.T, args ...string) *proc {
	t.Helper()
	p := spawnBroker(t, args...)
	p.waitServing(t)
	return p
}

// spawnBroker runs the binary without waiting: a member of an etcd cluster
// serves only once a quorum of its peers runs.
func spawnBroker(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(brokerBin, append([]string{"--listen", "127.0.0.1:0", "--log-level", "debug"}, args...)...),
		done: make(chan error, 1)}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	p.addrC = addr
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log.WriteString(line + "\n")
			p.mu.Unlock()
			if m := servingRe.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("allot-broker log:\n%s", p.logText())
		}
	})
	return p
}

// waitServing waits for the broker to log its gRPC address.
func (p *proc) waitServing(t *testing.T) {
	t.Helper()
	select {
	case p.addr = <-p.addrC:
	case err := <-p.done:
		t.Fatalf("allot-broker exited before serving: %v\n%s", err, p.logText())
	case <-time.After(60 * time.Second):
		t.Fatalf("allot-broker did not start serving\n%s", p.logText())
	}
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// signal sends sig and waits for the process to exit.
func (p *proc) signal(t *testing.T, sig syscall.Signal) error {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("allot-broker did not exit after %v\n%s", sig, p.logText())
		return nil
	}
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func leaderOf(ctx context.Context, c *grpc.ClientConn) (string, error) {
	st, err := allotv1.NewAdminServiceClient(c).GetStatus(ctx, &allotv1.GetStatusRequest{})
	if err != nil {
		return "", err
	}
	return st.GetLeader(), nil
}

func emptySim(t *testing.T) *awssim.Sim {
	t.Helper()
	sim, err := awssim.Start(context.Background(), awssim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// TestEmbeddedEtcdHealthAndSIGTERM starts the binary with no etcd flags:
// it must run an embedded etcd, report SERVING, lead, and on SIGTERM resign
// and exit 0.
func TestEmbeddedEtcdHealthAndSIGTERM(t *testing.T) {
	sim := emptySim(t)
	sec := newSecure(t, sim)
	p := startBroker(t, append(sec.args(t), "--data-dir", filepath.Join(t.TempDir(), "etcd"), "--name", "solo",
		"--ec2-endpoint", sim.EC2Endpoint())...)
	c := sec.admin(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	eventually(t, "health SERVING", func() error {
		resp, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("status %v", resp.GetStatus())
		}
		return nil
	})
	eventually(t, "leader solo", func() error {
		l, err := leaderOf(ctx, c)
		if err == nil && l != "solo" {
			err = fmt.Errorf("leader %q", l)
		}
		return err
	})

	if err := p.signal(t, syscall.SIGTERM); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logText())
	}
	log := p.logText()
	for _, want := range []string{"shutting down", "resigning", "allot-broker stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--bucket-share", "1.5"},
		{"--tls-cert", "x.pem"},
		{"--etcd-cacert", "ca.pem"},
		{"extra"},
		{}, // no TLS and no explicit insecure flag
	} {
		cmd := exec.Command(brokerBin, args...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: err %v, want exit 2\n%s", args, err, out)
		}
	}
}

// TestStandbyTakesOverAndFinishesTheWork runs two broker processes on one
// external etcd. Agents talk only to the standby; the leader is killed
// (SIGKILL: no resignation) right after the demands are stated. The standby
// must take the lead and deliver every address, leaving no ENI of ours
// unrecorded or unattached in EC2.
func TestStandbyTakesOverAndFinishesTheWork(t *testing.T) {
	const nodes, want = 6, 12
	sim, err := awssim.Start(context.Background(), awssim.Config{TimeScale: 10, Seed: 3, Scenario: scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"},
			Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/24", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "m5.large", Count: nodes}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	etcd := etcdembedtest.StartServer(t)
	sec := newSecure(t, sim)
	common := []string{"--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--cluster", "ha",
		"--ec2-endpoint", sim.EC2Endpoint(), "--time-scale", "10", "--election-ttl", "2s"}
	common = append(common, sec.args(t)...)
	a := startBroker(t, append([]string{"--name", "broker-a"}, common...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	eventually(t, "broker-a leads", func() error {
		l, err := leaderOf(ctx, sec.admin(t, a))
		if err == nil && l != "broker-a" {
			err = fmt.Errorf("leader %q", l)
		}
		return err
	})
	b := startBroker(t, append([]string{"--name", "broker-b"}, common...)...)
	bc := sec.admin(t, b)

	insts := sim.World().Instances()
	watches := make([]allotv1.NodeService_WatchNodeClient, len(insts))
	for i, inst := range insts {
		// Each node speaks for itself, attested.
		node := allotv1.NewNodeServiceClient(sec.node(t, b, inst.ID))
		if _, err := node.Register(ctx, &allotv1.RegisterRequest{Node: identityOf(inst)}); err != nil {
			t.Fatal(err)
		}
		if watches[i], err = node.WatchNode(ctx, &allotv1.WatchNodeRequest{InstanceId: inst.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := node.SetDemand(ctx, &allotv1.SetDemandRequest{InstanceId: inst.ID, Pending: want}); err != nil {
			t.Fatal(err)
		}
	}
	_ = a.signal(t, syscall.SIGKILL)

	for i, w := range watches {
		for n := 0; n < want; {
			ev, err := w.Recv()
			if err != nil {
				t.Fatalf("%s: watch: %v", insts[i].ID, err)
			}
			n = 0
			for _, e := range ev.GetEnis() {
				n += len(e.GetAddresses())
			}
		}
	}
	if l, err := leaderOf(ctx, bc); err != nil || l != "broker-b" {
		t.Fatalf("leader after the kill: %q, %v", l, err)
	}

	// Every ENI of ours in EC2 is attached and recorded; none leaked.
	var st *allotv1.GetStatusResponse
	eventually(t, "no open intents", func() error {
		var err error
		st, err = allotv1.NewAdminServiceClient(bc).GetStatus(ctx, &allotv1.GetStatusRequest{})
		if err == nil && st.GetOpenIntents() != 0 {
			err = fmt.Errorf("%d open intents", st.GetOpenIntents())
		}
		return err
	})
	recorded := map[string]bool{}
	enis, err := allotv1.NewAdminServiceClient(bc).ListENIs(ctx, &allotv1.ListENIsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range enis.GetEnis() {
		recorded[e.GetEni().GetEniId()] = true
	}
	for _, e := range sim.World().AllNetworkInterfaces() {
		if e.Tags[ec2client.TagCluster] != "ha" {
			continue
		}
		if !recorded[e.ID] || e.Attachment == nil {
			t.Errorf("ENI %s (status %s) leaked: recorded %v", e.ID, e.Status, recorded[e.ID])
		}
	}
}

func identityOf(inst world.Instance) *allotv1.NodeIdentity {
	prim := inst.NetworkInterfaces[0]
	return &allotv1.NodeIdentity{
		InstanceId: inst.ID, InstanceType: inst.Type, AvailabilityZone: inst.AvailabilityZone,
		VpcId: inst.VPCID, SubnetId: inst.SubnetID, PrimaryEniId: prim.ID, PrimaryMac: prim.MAC,
		PrimaryIp: prim.PrivateIP, SecurityGroupIds: prim.SecurityGroups,
	}
}
