package cluster

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/allotnet/allot/awssim"
)

// DemoConfig is one run of the demo.
type DemoConfig struct {
	Cluster Config
	// PodsPerNode is the burst size per node; default 20.
	PodsPerNode int
	// Parallel bounds the ADDs in flight per node (0: all at once).
	Parallel int
	// AddTimeout bounds the burst; default 3 minutes.
	AddTimeout time.Duration
	// SettleTimeout bounds the wait, after every pod is deleted, for the
	// cluster to be back within its warm targets; default 3 minutes.
	SettleTimeout time.Duration
	// AtPeak, if set, is called once every pod has its address, before
	// the connectivity checks: tests look at the running cluster there.
	AtPeak func(ctx context.Context, c *Cluster, pods []*Pod)
}

// RunDemo runs the whole story: start a cluster, create PodsPerNode pods on
// every node at once through the CNI plugin, check pod-to-pod traffic
// across nodes and SNAT to the outside host with real packets, read the
// figures, delete every pod and check that nothing leaked, then tear
// everything down and check that nothing is left. Progress lines go to
// progress. The report is returned even when a check fails; the error is
// for what stopped the run (including ctx ending, e.g. on Ctrl-C).
func RunDemo(ctx context.Context, cfg DemoConfig, progress io.Writer) (rep *Report, err error) {
	if cfg.PodsPerNode == 0 {
		cfg.PodsPerNode = 20
	}
	if cfg.AddTimeout == 0 {
		cfg.AddTimeout = 3 * time.Minute
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 3 * time.Minute
	}
	say := func(f string, a ...any) { fmt.Fprintf(progress, "-- "+f+"\n", a...) }

	say("starting awssim, its VPC data plane, allot-broker and %d allot-agents", max(cfg.Cluster.Nodes, 1))
	t0 := time.Now()
	c, err := Start(ctx, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	cc := c.cfg
	rep = &Report{Run: c.Prefix, Nodes: len(c.Nodes), InstanceType: cc.InstanceType, Mode: cc.Mode,
		TimeScale: cc.TimeScale, PodsPerNode: cfg.PodsPerNode, Parallel: cfg.Parallel, StartSeconds: time.Since(t0).Seconds()}
	defer func() {
		if err != nil {
			rep.check("the demo ran to the end", false, "%v", err)
		}
		// A failed teardown is a failed check, not an error: the report
		// still stands.
		cerr := c.Close()
		rep.check("cleanup: processes stopped, namespaces and run directory removed", cerr == nil, "%s", errText(cerr))
		rep.finish()
	}()
	say("cluster %s ready in %.1f s; run directory %s", c.Prefix, rep.StartSeconds, c.Dir)

	zero := map[string]awssim.ActionCounters{}
	joined, err := c.Counters(ctx)
	if err != nil {
		return rep, err
	}
	rep.EC2Join = callsBetween(zero, joined)

	say("creating %d pods (%d per node) in one burst through the allot CNI plugin", cfg.PodsPerNode*len(c.Nodes), cfg.PodsPerNode)
	addCtx, cancel := context.WithTimeout(ctx, cfg.AddTimeout)
	burstStart := time.Now()
	results, err := c.AddPods(addCtx, cfg.PodsPerNode, cfg.Parallel, "demo")
	cancel()
	if err != nil {
		return rep, err
	}
	rep.BurstSeconds = time.Since(burstStart).Seconds()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	peak, err := c.Counters(ctx)
	if err != nil {
		return rep, err
	}
	rep.EC2Burst = callsBetween(joined, peak)
	pods := rep.addFigures(c, results)
	if cc.CustomNetworking {
		rep.addCustomNetworking(ctx, c, pods)
	}
	if cfg.AtPeak != nil {
		cfg.AtPeak(ctx, c, pods)
	}
	say("%d of %d pods have an address after %.1f s", rep.PodsWithAddress, rep.Pods, rep.BurstSeconds)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	c.WaitReported(rctx, rep.PodsWithAddress)
	cancel()
	if rep.BudgetsTable, rep.Budgets, err = c.Budgets(ctx); err != nil {
		rep.check("allotctl budgets", false, "%v", err)
	}

	say("checking pod-to-pod traffic across nodes and SNAT to the outside host %s", c.Plane.OutsideAddr())
	pairs := CrossNodePairs(pods)
	if len(pairs) == 0 {
		rep.check("pod to pod across nodes", len(c.Nodes) < 2, "needs two nodes with pods")
	} else {
		r := c.CheckPairs(ctx, pairs)
		rep.check("pod to pod across nodes (TCP from each pod's namespace to a pod on the next node)", r.OK(),
			"%d/%d connections echoed%s", r.Tried-len(r.Failed), r.Tried, failures(r.Failed))
	}
	s := c.CheckSNAT(ctx, pods)
	rep.check("SNAT: pods reach "+c.Plane.OutsideAddr().String()+", which sees the node's primary address", s.OK(),
		"%d/%d connections seen from their node's primary address%s", s.Tried-len(s.Failed), s.Tried, failures(s.Failed))
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	say("deleting every pod through CNI DEL")
	var all []*Pod
	for _, r := range results {
		all = append(all, r.Pod)
	}
	delErrs := c.DeletePods(ctx, all)
	rep.check("CNI DEL of every pod", len(delErrs) == 0, "%d/%d succeeded%s", len(all)-len(delErrs), len(all), failures(delErrs))

	say("waiting for the broker to take the surplus back, then checking nothing leaked")
	sctx, cancel := context.WithTimeout(ctx, cfg.SettleTimeout)
	findings, took := c.WaitIdle(sctx)
	cancel()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	rep.SettleSeconds = took.Seconds()
	idle := c.EC2Footprint()
	for _, f := range idle {
		rep.IdleENIs += len(f.ENIs)
		rep.IdleAddresses += f.Addresses
	}
	rep.check("nothing leaked: ENIs and addresses within warm targets in EC2 and the broker's records, no stray links, rules or pod namespaces",
		len(findings) == 0, "%s", summarize(findings, 8))
	end, err := c.Counters(ctx)
	if err != nil {
		return rep, err
	}
	rep.EC2Teardown = callsBetween(peak, end)
	say("running allotctl check: EC2, etcd, every agent's pool and its host devices")
	// Agents report usage in batches; a report still naming addresses of
	// an ENI released a moment ago is drift only if it stays. A check that
	// could not run (an EC2 answer lost on the way) is tried again too.
	table, clean, err := c.Check(ctx)
	for wait := time.Now().Add(15 * time.Second); !clean && time.Now().Before(wait) && ctx.Err() == nil; {
		time.Sleep(time.Second)
		table, clean, err = c.Check(ctx)
	}
	rep.CheckTable = table
	detail := errText(err)
	if err == nil && !clean {
		detail = "disagreements found: see the table"
	}
	rep.check("allotctl check: EC2, the broker's records, every agent's pool and host devices agree", err == nil && clean,
		"%s", detail)
	say("tearing everything down")
	return rep, nil
}

// addFigures fills the burst's figures from its results and EC2's state,
// adds the address checks, and returns the pods that got an address.
func (r *Report) addFigures(c *Cluster, results []AddResult) []*Pod {
	r.Pods = len(results)
	var ok []*Pod
	var tta []time.Duration
	var errs []error
	perNode := map[*Node]int{}
	for _, res := range results {
		r.AddRetries += max(res.Pod.Attempts-1, 0)
		if res.Err != nil {
			errs = append(errs, res.Err)
			continue
		}
		ok = append(ok, res.Pod)
		tta = append(tta, res.Pod.TimeToAddress)
		perNode[res.Pod.Node]++
	}
	r.PodsWithAddress = len(ok)
	r.TimeToAddress = percentiles(tta)
	r.check("every pod got an address", len(errs) == 0 && len(ok) > 0, "%d/%d%s", len(ok), len(results), failures(errs))

	var wrong []error
	seen := map[netip.Addr]*Pod{}
	for _, p := range ok {
		if q, dup := seen[p.Addr]; dup {
			wrong = append(wrong, fmt.Errorf("%s and %s share %s", p.Name, q.Name, p.Addr))
		}
		seen[p.Addr] = p
		if inst, eni, found := c.EC2Owner(p.Addr); !found || inst != p.Node.InstanceID {
			wrong = append(wrong, fmt.Errorf("%s: EC2 has %s on %q of instance %q, not on its node %s", p.Name, p.Addr, eni, inst, p.Node.InstanceID))
		}
	}
	r.check("every address unique and assigned in EC2 to an ENI of the pod's own node", len(wrong) == 0 && len(ok) > 0,
		"%d/%d%s", len(ok)-len(wrong), len(ok), failures(wrong))

	fp := c.EC2Footprint()
	for _, n := range c.Nodes {
		f := fp[n.InstanceID]
		r.ENIs += len(f.ENIs)
		r.Addresses += f.Addresses
		r.PerNode = append(r.PerNode, NodeLine{Name: n.Name, InstanceID: n.InstanceID, SubnetID: n.SubnetID,
			PrimaryIP: n.PrimaryIP.String(), Pods: perNode[n], ENIs: len(f.ENIs), Addresses: f.Addresses})
	}
	return ok
}

// failures renders the first few errors after a count.
func failures(errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return "; failed: " + summarize(s, 3)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
