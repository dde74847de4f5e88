package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/internal/freeport"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// replica is one of three brokers whose embedded etcd members form one
// cluster, as the StatefulSet runs them.
type replica struct {
	cfg    brokerd.Config
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *replica) start(t *testing.T, started chan<- error) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		b, err := brokerd.New(ctx, r.cfg) // waits for a quorum of members
		started <- err
		if err != nil {
			return
		}
		defer b.Close()
		_ = b.Run(ctx)
	}()
}

func (r *replica) stop() {
	if r.cancel != nil {
		r.cancel()
		<-r.done
		r.cancel = nil
	}
}

// threeBrokers starts three replicas and returns them with a connection
// to all of them the way allot-agent dials several --broker addresses
// (pick_first over the list: it moves on when one stops answering).
func threeBrokers(t *testing.T, ec2 string) ([3]*replica, allotv1.NodeServiceClient) {
	t.Helper()
	addr := func() string {
		a, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var rs [3]*replica
	var members []string
	peers := [3]string{addr(), addr(), addr()}
	for i, p := range peers {
		members = append(members, fmt.Sprintf("b%d=http://%s", i, p))
	}
	dir := t.TempDir()
	started := make(chan error, 3)
	var addrs []resolver.Address
	for i := range rs {
		rs[i] = &replica{cfg: brokerd.Config{
			Name: fmt.Sprintf("b%d", i), Cluster: "quorum", Listen: addr(), ElectionTTL: 2 * time.Second,
			Etcd: brokerd.EtcdConfig{DataDir: filepath.Join(dir, fmt.Sprint(i)), Member: brokerd.EtcdMember{
				Name: fmt.Sprintf("b%d", i), PeerURL: "http://" + peers[i], ClientURL: "http://" + addr(),
				InitialCluster: strings.Join(members, ","),
			}},
			EC2:    brokerd.EC2Config{Endpoint: ec2, BucketShare: 1},
			Logger: testLogger(t).With("replica", i),
		}}
		addrs = append(addrs, resolver.Address{Addr: rs[i].cfg.Listen})
		rs[i].start(t, started)
		t.Cleanup(rs[i].stop)
	}
	for range rs {
		if err := <-started; err != nil {
			t.Fatal(err)
		}
	}
	r := manual.NewBuilderWithScheme("allot-brokers")
	r.InitialState(resolver.State{Addresses: addrs})
	conn, err := grpc.NewClient(r.Scheme()+":///brokers", append(brokerlink.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithResolvers(r))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return rs, allotv1.NewNodeServiceClient(conn)
}

// TestQuorumLossAgentsServeFromPools runs a real agent against three
// brokers on one embedded etcd cluster. With two of the three stopped (no
// etcd quorum), no broker changes EC2, yet the agent serves ADDs from its
// warm pool and keeps the demand of the ADDs its pool cannot serve; with
// one broker back, that demand is met and the waiting ADDs are answered.
func TestQuorumLossAgentsServeFromPools(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three brokers and an etcd cluster")
	}
	e := newEnv(t)
	rs, client := threeBrokers(t, e.sim.EC2Endpoint())
	cfg := e.config()
	cfg.MaxAddWait = 60 * time.Second // the waiting ADDs outlast the quorum loss
	a := e.startOn(cfg, hostnettest.NewRecorder(), client)
	// The default warm target: one ENI's worth (14 on c5.xlarge).
	brokertest.WaitFor(t, 60*time.Second, "warm pool filled", func() bool { return a.Pool().Stats().Available() >= 14 })
	warm := a.Pool().Stats().Available()

	rs[0].stop()
	rs[1].stop()
	lost := time.Now()
	time.Sleep(3 * time.Second) // past the 2s election TTL: nobody leads
	base := mutating(e)
	seen := map[netip.Addr]string{}
	var slowest time.Duration
	for i := range warm {
		start := time.Now()
		res := mustAdd(t, a, podReq(fmt.Sprintf("w%d", i), fmt.Sprintf("web-%d", i)))
		slowest = max(slowest, time.Since(start))
		if prev, dup := seen[res.Address.Addr()]; dup {
			t.Fatalf("%v given to %s and w%d", res.Address, prev, i)
		}
		seen[res.Address.Addr()] = fmt.Sprintf("w%d", i)
	}
	t.Logf("figure: quorum lost: %d ADDs served from the warm pool, the slowest in %v", warm, slowest.Round(time.Millisecond))

	// Beyond the pool: these ADDs wait, and their demand stays with the agent.
	const extra = 4
	type answer struct {
		addr netip.Addr
		err  error
		at   time.Time
	}
	answers := make(chan answer, extra)
	var wg sync.WaitGroup
	for i := range extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := a.Add(context.Background(), podReq(fmt.Sprintf("x%d", i), fmt.Sprintf("late-%d", i)))
			answers <- answer{res.Address.Addr(), err, time.Now()}
		}()
	}
	time.Sleep(5 * time.Second)
	if n := mutating(e) - base; n != 0 {
		t.Fatalf("%d mutating EC2 calls with one broker of three", n)
	}
	if len(answers) != 0 {
		a := <-answers
		t.Fatalf("an ADD beyond the pool was answered without a quorum: %v, %v", a.addr, a.err)
	}
	t.Logf("figure: quorum lost for %v: 0 mutating EC2 calls; %d ADDs beyond the pool waiting", time.Since(lost).Round(time.Second), extra)

	back := time.Now()
	started := make(chan error, 1)
	rs[0].start(t, started)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(answers)
	var last time.Time
	for ans := range answers {
		if ans.err != nil {
			t.Fatalf("a waiting ADD failed after the quorum came back: %v", ans.err)
		}
		if prev, dup := seen[ans.addr]; dup {
			t.Fatalf("%v given twice (%s)", ans.addr, prev)
		}
		seen[ans.addr] = "late"
		if ans.at.After(last) {
			last = ans.at
		}
	}
	t.Logf("figure: one broker back: the %d waiting ADDs answered %v later, with %d mutating EC2 calls",
		extra, last.Sub(back).Round(100*time.Millisecond), mutating(e)-base)
}

// mutating counts the mutating EC2 calls awssim has answered.
func mutating(e *env) int64 {
	var n int64
	for action, c := range e.sim.Counters() {
		if !strings.HasPrefix(action, "Describe") {
			n += c.Calls
		}
	}
	return n
}
