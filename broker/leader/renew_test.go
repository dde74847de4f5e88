package leader

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

// renewalGate holds the lease renewals a client sends: they leave the
// client only once the gate lets them, as renewals that etcd is slow to
// take up (a renewal that reaches a busy etcd while its raft loop is late
// waits for its apply loop to catch up).
type renewalGate struct {
	mu      sync.Mutex
	holdAll bool          // every renewal is held
	holdOne bool          // the next renewal is held
	release chan struct{} // closed to let the held ones go
	held    chan struct{} // receives when a renewal is held
}

func newRenewalGate() *renewalGate {
	return &renewalGate{release: make(chan struct{}), held: make(chan struct{}, 100)}
}

func (g *renewalGate) wait(ctx context.Context) {
	g.mu.Lock()
	hold := g.holdAll || g.holdOne
	g.holdOne = false
	release := g.release
	g.mu.Unlock()
	if !hold {
		return
	}
	select {
	case g.held <- struct{}{}:
	default:
	}
	select {
	case <-release:
	case <-ctx.Done():
	}
}

func (g *renewalGate) set(one, all bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdOne, g.holdAll = one, all
}

func (g *renewalGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdOne, g.holdAll = false, false
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

type gatedStream struct {
	grpc.ClientStream
	g *renewalGate
}

func (s gatedStream) SendMsg(m any) error {
	s.g.wait(s.Context())
	return s.ClientStream.SendMsg(m)
}

// dial is a client of srv whose lease renewals pass g.
func (g *renewalGate) dial(t *testing.T, srv *etcdembed.Server) *clientv3.Client {
	t.Helper()
	cli, err := srv.Client(grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn,
		method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || method != "/etcdserverpb.Lease/LeaseKeepAlive" {
			return cs, err
		}
		return gatedStream{ClientStream: cs, g: g}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

// gatedReplica is a replica whose renewals pass a gate.
func gatedReplica(t *testing.T, srv *etcdembed.Server, name string, ttl time.Duration) (*replica, *renewalGate) {
	t.Helper()
	g := newRenewalGate()
	cli := g.dial(t, srv)
	el, err := New(Config{Client: cli, Prefix: "/allot/v1/test/", Name: name, TTL: ttl,
		RetryDelay: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, cli: cli, el: el,
		leading: make(chan struct{}, 10), stopped: make(chan struct{}, 10), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		_ = el.Run(ctx, func(ctx context.Context) error {
			r.mu.Lock()
			r.started++
			r.mu.Unlock()
			r.leading <- struct{}{}
			<-ctx.Done()
			r.mu.Lock()
			r.ended++
			r.mu.Unlock()
			r.stopped <- struct{}{}
			return ctx.Err()
		})
	}()
	t.Cleanup(func() {
		g.open()
		r.stop(t)
		_ = cli.Close()
	})
	return r, g
}

// TestHeldRenewalKeepsTheTerm: one renewal held up for twice the TTL
// does not end the term. The renewals after it go out on streams of their
// own and keep the lease; the etcd client's keepalive sends every renewal
// of a client on one stream, one after another, so there the held one
// held up every later one and the lease expired.
func TestHeldRenewalKeepsTheTerm(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	const ttl = 2 * time.Second
	a, g := gatedReplica(t, srv, "broker-a", ttl)
	wait(t, a.leading, "broker-a to lead")
	b := newReplica(t, srv, "broker-b", ttl)

	for range 3 {
		g.set(true, false)
		wait(t, g.held, "a renewal to be held")
		select {
		case <-a.stopped:
			t.Fatal("broker-a's term ended while one of its renewals was held")
		case <-b.leading:
			t.Fatal("broker-b leads while broker-a's renewals after the held one went out")
		case <-time.After(2 * ttl):
		}
	}
	if !a.el.IsLeader() {
		t.Fatal("broker-a no longer leads")
	}
	if got := leaderName(t, b.el); got != "broker-a" {
		t.Fatalf("leader %q, want broker-a", got)
	}
}

// TestUnrenewedTermEnds: a leader none of whose renewals reach etcd (its
// process frozen for etcd's purposes while its work goes on) stops leading
// within the TTL of its last acknowledged renewal, before etcd lets the
// lease go and a standby can lead.
func TestUnrenewedTermEnds(t *testing.T) {
	srv := etcdembedtest.StartServer(t)
	const ttl = 2 * time.Second
	a, g := gatedReplica(t, srv, "broker-a", ttl)
	wait(t, a.leading, "broker-a to lead")
	b := newReplica(t, srv, "broker-b", ttl)

	held := time.Now()
	g.set(false, true)
	var stopped time.Time
	select {
	case <-a.stopped:
		stopped = time.Now()
	case <-b.leading:
		t.Fatal("broker-b leads while broker-a's term has not ended")
	case <-time.After(10 * ttl):
		t.Fatal("broker-a still leads 10 TTLs after its renewals stopped")
	}
	// The last renewal acknowledged was sent at most a renewal interval
	// before the hold, and one held may have been sent (and taken up by
	// etcd) just before it.
	if d := stopped.Sub(held); d > ttl+time.Second {
		t.Errorf("broker-a stopped leading %s after its renewals stopped, want within the TTL (%s)", d, ttl)
	}
	wait(t, b.leading, "broker-b to take over once broker-a's lease expired")
	if got := leaderName(t, b.el); got != "broker-b" {
		t.Fatalf("leader %q, want broker-b", got)
	}
}
