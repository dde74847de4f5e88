package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/netnstest"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// poll calls check every interval until it returns no findings or ctx ends;
// it returns the last findings.
func poll(ctx context.Context, interval time.Duration, check func() []string) []string {
	for {
		f := check()
		if len(f) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return append(f, "gave up waiting: "+ctx.Err().Error())
		case <-time.After(interval):
		}
	}
}

// WaitSettled waits until the broker has registered every node, alive,
// with its warm pool filled and nothing in flight, and every agent's pool
// holds exactly the addresses EC2 has on its node (nothing delivered and
// not yet confirmed).
func (c *Cluster) WaitSettled(ctx context.Context) error {
	f := poll(ctx, 200*time.Millisecond, func() []string {
		nodes, err := c.BrokerNodes(ctx)
		if err != nil {
			return []string{err.Error()}
		}
		var out []string
		ec2 := c.EC2Footprint()
		for _, n := range c.liveNodes() {
			if n.Agent.Running() {
				enis, err := n.Agent.ENIs(ctx)
				if err != nil {
					out = append(out, fmt.Sprintf("%s agent /v1/enis: %v", n.Name, err))
					continue
				}
				pool := 0
				for _, e := range enis {
					pool += len(e.Addresses)
				}
				if want := ec2[n.InstanceID].Addresses; pool != want {
					out = append(out, fmt.Sprintf("%s agent pool holds %d addresses, EC2 %d", n.Name, pool, want))
				}
			}
			s, ok := nodes[n.InstanceID]
			switch {
			case !ok:
				out = append(out, n.Name+" not registered")
			case !s.GetAlive() || s.GetWarm() == 0 || s.GetWarmShortfall() > 0 || s.GetPending() > 0 || s.GetOperationInProgress():
				out = append(out, fmt.Sprintf("%s: alive=%v warm=%d shortfall=%d pending=%d busy=%v", n.Name,
					s.GetAlive(), s.GetWarm(), s.GetWarmShortfall(), s.GetPending(), s.GetOperationInProgress()))
			}
		}
		return out
	})
	if len(f) > 0 {
		return fmt.Errorf("not settled: %s", strings.Join(f, "; "))
	}
	return nil
}

// WaitReported waits until the broker's view of the nodes counts pods
// assigned addresses (agents report usage in batches), so figures read
// from it are current; it gives up quietly when ctx ends.
func (c *Cluster) WaitReported(ctx context.Context, pods int) {
	poll(ctx, 100*time.Millisecond, func() []string {
		nodes, err := c.BrokerNodes(ctx)
		if err != nil {
			return []string{err.Error()}
		}
		n := 0
		for _, s := range nodes {
			n += int(s.GetAssigned())
		}
		if n != pods {
			return []string{fmt.Sprintf("broker counts %d pods, want %d", n, pods)}
		}
		return nil
	})
}

// IdleFindings lists every way the cluster differs from an idle cluster
// that leaked nothing, once every pod is deleted:
//   - EC2 (awssim): each node holds no more addresses and ENIs than its warm
//     target plus the broker's release margin; no ENI of ours is left
//     unattached (created, detaching or available);
//   - the broker's records equal EC2's, ENI by ENI and address by address,
//     no intent is open, and it has no record of a removed node;
//   - each agent lists no pod;
//   - each node namespace holds only lo and the node's ENI links, and no
//     per-pod rule;
//   - no pod namespace of the run is left.
func (c *Cluster) IdleFindings(ctx context.Context) []string {
	var out []string
	add := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	typ, _ := c.Sim.World().InstanceType(c.cfg.InstanceType)
	maxAddrs, maxENIs := c.cfg.Warm.allowedIdle(c.cfg.Mode, typ.IPv4PerENI)
	if c.cfg.CustomNetworking {
		maxENIs++ // the primary ENI holds no pod address: the warm ones sit on ENIs beside it
	}
	ec2 := c.EC2Footprint()
	for _, n := range c.liveNodes() {
		f := ec2[n.InstanceID]
		if f.Addresses > maxAddrs {
			add("%s holds %d addresses in EC2, warm target allows %d", n.Name, f.Addresses, maxAddrs)
		}
		if len(f.ENIs) > maxENIs {
			add("%s has %d ENIs attached in EC2, warm target allows %d", n.Name, len(f.ENIs), maxENIs)
		}
	}
	for _, e := range c.OurENIs() {
		if e.Attachment == nil || e.Status != "in-use" {
			add("ENI %s of ours is %s in EC2, not attached (leaked, or a detach not finished)", e.ID, e.Status)
		}
	}
	out = append(out, c.recordFindings(ctx, ec2)...)
	for _, n := range c.liveNodes() {
		if n.Agent.Running() {
			pods, err := n.Agent.Pods(ctx)
			if err != nil {
				add("%s agent /v1/pods: %v", n.Name, err)
			} else if len(pods) > 0 {
				add("%s agent still lists %d pods", n.Name, len(pods))
			}
		}
		h, err := n.Host(c.ENIMACs(n.InstanceID))
		if err != nil {
			add("%v", err)
			continue
		}
		if len(h.Stray) > 0 {
			add("%s namespace has links that are no ENI of the node: %v", n.Name, h.Stray)
		}
		if len(h.PodRules) > 0 {
			add("%s namespace has pod rules left: %v", n.Name, h.PodRules)
		}
	}
	if left, err := netnstest.WithPrefix(c.Prefix + podInfix); err != nil || len(left) > 0 {
		add("pod namespaces left: %v %v", left, err)
	}
	return out
}

// recordFindings compares the broker's records with EC2's state.
func (c *Cluster) recordFindings(ctx context.Context, ec2 map[string]NodeFootprint) []string {
	var out []string
	add := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	recs, status, err := c.BrokerFootprint(ctx)
	if err != nil {
		return []string{err.Error()}
	}
	st, err := c.admin().GetStatus(ctx, &allotv1.GetStatusRequest{})
	if err != nil {
		return []string{fmt.Sprintf("broker GetStatus: %v", err)}
	}
	if st.GetOpenIntents() > 0 {
		add("broker has %d open intents", st.GetOpenIntents())
	}
	for id, f := range recs {
		if c.Node(id) == nil || c.isRemoved(id) {
			add("broker still records %d ENIs of instance %s, which is gone", len(f.ENIs), id)
		}
	}
	for _, n := range c.liveNodes() {
		out = append(out, compareENIs(n.Name, ec2[n.InstanceID], recs[n.InstanceID], status)...)
	}
	return out
}

// compareENIs lists the differences between EC2's ENIs of a node and the
// broker's records. The primary ENI needs a record only once it carries
// addresses for pods.
func compareENIs(node string, ec2, rec NodeFootprint, status map[string]string) []string {
	var out []string
	recBy := map[string]ENIView{}
	for _, e := range rec.ENIs {
		recBy[e.ID] = e
	}
	for _, e := range ec2.ENIs {
		r, ok := recBy[e.ID]
		delete(recBy, e.ID)
		switch {
		case !ok && e.Primary && len(e.Addresses) == 0:
		case !ok:
			out = append(out, fmt.Sprintf("%s: ENI %s (device %d) is attached in EC2 with %d addresses but the broker has no record",
				node, e.ID, e.DeviceIndex, len(e.Addresses)))
		case !slices.Equal(r.Addresses, e.Addresses):
			out = append(out, fmt.Sprintf("%s: ENI %s addresses differ: EC2 %v, broker %v", node, e.ID, e.Addresses, r.Addresses))
		case status[e.ID] != store.ENIAttached:
			out = append(out, fmt.Sprintf("%s: ENI %s is attached in EC2, broker records it %s", node, e.ID, status[e.ID]))
		}
	}
	for id, r := range recBy {
		out = append(out, fmt.Sprintf("%s: broker records ENI %s (%s, %d addresses) that EC2 does not show attached",
			node, id, status[id], len(r.Addresses)))
	}
	return out
}

// WaitIdle waits until IdleFindings is empty (the broker takes surplus back
// only after it has lasted a while, and detaches take simulated time), and
// returns the findings left when ctx ended, and how long it took.
func (c *Cluster) WaitIdle(ctx context.Context) ([]string, time.Duration) {
	start := time.Now()
	f := poll(ctx, 250*time.Millisecond, func() []string { return c.IdleFindings(ctx) })
	return f, time.Since(start)
}

func (c *Cluster) isRemoved(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.removed[id]
}
