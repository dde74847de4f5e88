package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/simclock"
)

// prober opens TCP connections between pod pairs over and over until
// stopped, counting what got through.
type prober struct {
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	tried  int
	failed []error
}

func startProber(c *Cluster, pairs [][2]*Pod) *prober {
	p := &prober{stop: make(chan struct{}), done: make(chan struct{})}
	for _, pr := range pairs {
		_ = pr[1].Serve()
	}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			pr := pairs[i%len(pairs)]
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			err := pr[0].PingPod(ctx, pr[1])
			cancel()
			p.mu.Lock()
			p.tried++
			if err != nil {
				p.failed = append(p.failed, fmt.Errorf("%s: %w", time.Now().Format("15:04:05.000"), err))
			}
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *prober) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tried
}

func (p *prober) finish() (int, []error) {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tried, p.failed
}

// TestAgentRestartKeepsPodsConnected restarts agents under running pods —
// one killed with SIGKILL, one stopped with SIGTERM — while connections
// between pods on different nodes are opened continuously. None may fail,
// during or after; EC2 must still have every pod's address on its node and
// the same ENIs attached (the restart freed nothing); each restarted agent
// lists its pods again, CHECK passes for every pod, and a new pod added
// after the restart is connected too.
func TestAgentRestartKeepsPodsConnected(t *testing.T) {
	c := startCluster(t, testConfig(t, 2))
	pods := addAll(t, c, 4, 0, "restart")
	requireConnected(t, c, pods)
	// Let the broker finish refilling the warm pools first, so any change
	// to EC2 below is the restart's doing.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := c.WaitSettled(wctx); err != nil {
		t.Fatal(err)
	}
	before := c.EC2Footprint()

	pr := startProber(c, CrossNodePairs(pods))
	n0, n1 := c.Nodes[0], c.Nodes[1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := n0.Agent.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := n1.Agent.Stop(); err != nil {
		t.Fatal(err)
	}
	// Both agents are down: traffic must keep flowing on what the kernel
	// holds. Wait for a good number of probes to pass through this window.
	downFrom := pr.count()
	eventually(t, 30*time.Second, "probes while agents are down", func() error {
		if n := pr.count() - downFrom; n < 20 {
			return fmt.Errorf("%d probes so far", n)
		}
		return nil
	})
	for _, n := range []*Node{n0, n1} {
		if err := n.Agent.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []*Node{n0, n1} {
		if err := n.Agent.WaitReady(ctx); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
	}
	upFrom := pr.count()
	eventually(t, 30*time.Second, "probes after restart", func() error {
		if n := pr.count() - upFrom; n < 20 {
			return fmt.Errorf("%d probes so far", n)
		}
		return nil
	})
	tried, failed := pr.finish()
	if len(failed) > 0 {
		t.Errorf("%d of %d pod-to-pod connections failed across the restarts: %v", len(failed), tried, failed)
	}
	t.Logf("%d pod-to-pod connections across the restarts, %d failed", tried, len(failed))

	requireOwned(t, c, pods)
	after := c.EC2Footprint()
	for id, b := range before {
		if a := after[id]; !slices.EqualFunc(a.ENIs, b.ENIs, func(x, y ENIView) bool {
			return x.ID == y.ID && slices.Equal(x.Addresses, y.Addresses)
		}) {
			t.Errorf("%s: EC2 ENIs changed across the agent restart:\nbefore %+v\nafter  %+v", id, b.ENIs, a.ENIs)
		}
	}
	for _, n := range []*Node{n0, n1} {
		listed, err := n.Agent.Pods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, p := range pods {
			if p.Node == n {
				want[p.Addr.String()] = true
			}
		}
		got := map[string]bool{}
		for _, p := range listed {
			got[p.Addr] = true
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s lists pods %v after restart, want %v", n.Name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
	}
	for _, p := range pods {
		if err := c.CheckPod(ctx, p); err != nil {
			t.Errorf("CHECK %s after restart: %v", p, err)
		}
	}
	more := addAll(t, c, 1, 0, "after")
	requireOwned(t, c, append(slices.Clone(pods), more...))
	requireConnected(t, c, append(pods, more...))
	deleteAllAndWaitIdle(t, c, append(pods, more...))
}

// TestBrokerRestartDuringBurst kills the broker with SIGKILL in the middle
// of a burst that needs new ENIs (attaches are slowed so some are in
// flight), and starts it again on the same etcd data. Every pod must still
// get an address (the runtime retries "try again later" as kubelet does),
// on its own node, connected; EC2 and the broker's records must agree with
// no ENI of ours left unattached; after DEL, nothing beyond the warm
// targets is left.
func TestBrokerRestartDuringBurst(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.InstanceType = "t3.medium"
	cfg.Warm = WarmTargets{WarmIPs: 1}
	c := startCluster(t, cfg)
	// An attach takes 4 simulated seconds (0.2 s here), so a crash is
	// likely to fall between CreateNetworkInterface and the end of
	// AttachNetworkInterface: the intents must resolve it.
	c.Sim.SetFaults(map[string]awssim.Fault{"AttachNetworkInterface": {Latency: simclock.Duration(4 * time.Second)}})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := c.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type burst struct {
		res []AddResult
		err error
	}
	done := make(chan burst, 1)
	go func() {
		res, err := c.AddPods(ctx, 8, 0, "burst")
		done <- burst{res, err}
	}()
	eventually(t, 60*time.Second, "the burst's first CreateNetworkInterface", func() error {
		now, err := c.Counters(ctx)
		if err != nil {
			return err
		}
		if n := now["CreateNetworkInterface"].Calls - before["CreateNetworkInterface"].Calls; n == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	if err := c.Broker.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if err := c.Broker.Start(ctx); err != nil {
		t.Fatalf("restart broker: %v", err)
	}
	b := <-done
	if b.err != nil {
		t.Fatal(b.err)
	}
	pods := podsOf(t, b.res)
	c.Sim.SetFaults(nil)
	requireOwned(t, c, pods)
	requireConnected(t, c, pods)
	eventually(t, time.Minute, "EC2 and the broker's records agree, no ENI unattached", func() error {
		var f []string
		for _, e := range c.OurENIs() {
			if e.Attachment == nil {
				f = append(f, fmt.Sprintf("ENI %s is %s", e.ID, e.Status))
			}
		}
		f = append(f, c.recordFindings(ctx, c.EC2Footprint())...)
		if len(f) > 0 {
			return errors.New(summarize(f, 6))
		}
		return nil
	})
	deleteAllAndWaitIdle(t, c, pods)
}

// TestAgentRestartWhileENIArrives kills an agent while the broker is
// attaching a new ENI for it (attaches are slowed so the ENI lands while
// the agent is down), and starts it again once EC2 shows the ENI attached.
// The restarted agent must take the ENI's addresses into its pool (the
// broker counts them warm and the node's demand settles), its pods must
// stay connected, and a new pod must get an address.
func TestAgentRestartWhileENIArrives(t *testing.T) {
	c := startCluster(t, testConfig(t, 2))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n0 := c.Nodes[0]
	c.Sim.SetFaults(map[string]awssim.Fault{"AttachNetworkInterface": {Latency: simclock.Duration(20 * time.Second)}})
	before, err := c.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Four pods eat into the one warm ENI's worth of free addresses: the
	// broker creates a second ENI to refill it.
	pods := addAll(t, c, 4, 0, "arrive")
	eventually(t, 30*time.Second, "the refill's CreateNetworkInterface", func() error {
		now, err := c.Counters(ctx)
		if err != nil {
			return err
		}
		if now["CreateNetworkInterface"].Calls == before["CreateNetworkInterface"].Calls {
			return errors.New("none yet")
		}
		return nil
	})
	if err := n0.Agent.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a second ENI attached to "+n0.Name, func() error {
		if n := len(c.EC2Footprint()[n0.InstanceID].ENIs); n < 2 {
			return fmt.Errorf("%d ENIs", n)
		}
		return nil
	})
	c.Sim.SetFaults(nil)
	if err := n0.Agent.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n0.Agent.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	fp := c.EC2Footprint()[n0.InstanceID]
	enis, err := n0.Agent.ENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inPool := 0
	for _, e := range enis {
		inPool += len(e.Addresses)
	}
	if inPool != fp.Addresses {
		t.Errorf("%s's pool holds %d addresses, EC2 has %d on its ENIs", n0.Name, inPool, fp.Addresses)
	}
	more := addAll(t, c, 1, 0, "arrive-after")
	all := append(pods, more...)
	requireOwned(t, c, all)
	requireConnected(t, c, all)
	deleteAllAndWaitIdle(t, c, all)
}
