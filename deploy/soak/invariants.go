package soak

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// The invariants, by the name the report counts their violations under.
const (
	// InvUniqueAddr: no address is held by two live pods (the driver's
	// ADD results, and the agents' records of every node).
	InvUniqueAddr = "address_held_twice"
	// InvRecordKept: a pod the runtime holds is in its agent's records
	// whenever the agent serves (a forgotten pod's address could be handed
	// out again).
	InvRecordKept = "pod_record_lost"
	// InvAssigned: EC2 has a live pod's address assigned to an ENI
	// attached to the pod's node.
	InvAssigned = "address_unassigned_in_ec2"
	// InvENIAttached: the ENI an agent records for a live pod exists and
	// is attached to the pod's node in EC2.
	InvENIAttached = "eni_detached_while_holding"
	// InvHostDevice: a live pod's host-side veth exists in its node's
	// namespace.
	InvHostDevice = "pod_without_host_device"
	// InvAddAnswers: every ADD ends within its bound with a result or a
	// CNI error, and every pod's DEL eventually succeeds.
	InvAddAnswers = "add_without_cni_answer"
	// InvUnknownENI: after the run and one GC pass, EC2 has no ENI tagged
	// as this cluster's that the broker's records (etcd) do not list.
	InvUnknownENI = "eni_unknown_to_etcd"
	// InvOpenIntent: after the run and one GC pass no intent is open.
	InvOpenIntent = "open_intent"
	// InvIdle: after the run and one GC pass the cluster is idle and
	// leaked nothing (cluster.IdleFindings: EC2 within warm targets, no
	// unattached ENI, broker records equal EC2's, no pod record, device
	// or namespace left).
	InvIdle = "not_idle_after_gc"
	// InvCheck: `allotctl check` finds nothing to report.
	InvCheck = "allotctl_check"
	// InvCNICheck: CNI CHECK of a live pod passes, or says only "try again
	// later" (its agent is down or starting).
	InvCNICheck = "cni_check_failed"
)

// Invariants lists them all.
var Invariants = []string{InvUniqueAddr, InvRecordKept, InvAssigned, InvENIAttached, InvHostDevice,
	InvAddAnswers, InvUnknownENI, InvOpenIntent, InvIdle, InvCheck, InvCNICheck}

// watch checks the continuous invariants every second until ctx ends. A
// finding counts only when the next pass finds it again with the pod still
// live throughout, so a pod whose ADD or DEL is in flight never counts.
func (s *soak) watch(ctx context.Context) {
	pending := map[string]finding{}
	for ctx.Err() == nil {
		sleep(ctx, time.Second)
		now := map[string]finding{}
		for _, f := range s.findings(ctx) {
			now[f.key] = f
		}
		for k, f := range now {
			if _, ok := pending[k]; ok {
				s.violate(f.inv, "%s", f.detail)
				delete(now, k) // counted once; a third sighting counts again
			}
		}
		pending = now
		s.mu.Lock()
		s.res.Checks++
		s.mu.Unlock()
	}
}

type finding struct{ key, inv, detail string }

// findings is one pass over the driver's live pods, the agents' records,
// the nodes' devices and awssim's state.
func (s *soak) findings(ctx context.Context) []finding {
	var out []finding
	add := func(inv, key, format string, a ...any) {
		out = append(out, finding{key: inv + "/" + key, inv: inv, detail: fmt.Sprintf(format, a...)})
	}
	before := s.livePods()
	type rec struct {
		node *cluster.Node
		cid  string
		eni  string
		veth string
	}
	recs := map[netip.Addr][]rec{}
	byCID := map[string]rec{}
	served := map[*cluster.Node]bool{}
	for _, n := range s.c.LiveNodes() {
		if !n.Agent.Running() || s.retired(n) {
			continue
		}
		pods, err := n.Agent.Pods(ctx)
		if err != nil {
			continue // restarting: its records are read on a later pass
		}
		served[n] = true
		for _, p := range pods {
			a, err := netip.ParseAddr(p.Addr)
			if err != nil {
				continue
			}
			r := rec{node: n, cid: p.ContainerID, eni: p.ENIID, veth: p.HostVeth}
			recs[a] = append(recs[a], r)
			byCID[p.ContainerID] = r
		}
	}
	for a, rs := range recs {
		if len(rs) > 1 {
			var who []string
			for _, r := range rs {
				who = append(who, r.node.Name+"/"+r.cid)
			}
			add(InvUniqueAddr, a.String(), "%s recorded for %d pods: %v", a, len(rs), who)
		}
	}
	hosts := map[*cluster.Node][]string{}
	after := map[*cluster.Pod]bool{}
	for _, p := range s.livePods() {
		after[p] = true
	}
	held := map[netip.Addr]*cluster.Pod{}
	for _, p := range before {
		if !after[p] || s.retired(p.Node) {
			continue
		}
		if q, ok := held[p.Addr]; ok {
			add(InvUniqueAddr, p.Addr.String(), "%s returned by ADD to %s and %s", p.Addr, p, q)
		}
		held[p.Addr] = p
		r, ok := byCID[p.ContainerID()]
		if !ok {
			if served[p.Node] {
				add(InvRecordKept, p.ContainerID(), "%s missing from its agent's /v1/pods", p)
			}
			continue
		}
		inst, eni, ok := s.c.EC2Owner(p.Addr)
		if !ok || inst != p.Node.InstanceID {
			add(InvAssigned, p.ContainerID(), "%s: EC2 has the address on instance %q ENI %q", p, inst, eni)
		}
		if !s.eniAttached(r.eni, p.Node.InstanceID) {
			add(InvENIAttached, p.ContainerID(), "%s: its ENI %s is not attached to %s in EC2", p, r.eni, p.Node.InstanceID)
		}
		if r.veth != "" {
			if _, ok := hosts[p.Node]; !ok {
				h, err := p.Node.Host(s.c.ENIMACs(p.Node.InstanceID))
				if err != nil {
					continue
				}
				hosts[p.Node] = h.Stray
			}
			if !slices.Contains(hosts[p.Node], r.veth) {
				add(InvHostDevice, p.ContainerID(), "%s: no link %s in %s's namespace", p, r.veth, p.Node.Name)
			}
		}
	}
	return out
}

// eniAttached says whether EC2 has the ENI attached to the instance.
func (s *soak) eniAttached(id, instanceID string) bool {
	for _, e := range s.c.Sim.World().AllNetworkInterfaces() {
		if e.ID == id {
			return e.Attachment != nil && e.Attachment.InstanceID == instanceID
		}
	}
	return false
}

// checkBound is how long `allotctl check` may take to come back clean
// after the cluster went idle.
const checkBound = 30 * time.Second

// finish brings every process back, deletes what pods are left, runs one
// CNI GC pass per node and checks the end invariants.
func (s *soak) finish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for _, b := range s.c.Brokers {
		if !b.Running() {
			if err := b.Launch(); err != nil {
				return err
			}
		}
	}
	for _, b := range s.c.Brokers {
		if err := b.WaitLeader(ctx); err != nil {
			return err
		}
	}
	for _, n := range s.c.LiveNodes() {
		if !n.Agent.Running() {
			if err := n.Agent.Start(); err != nil {
				return err
			}
		}
		if err := n.Agent.WaitReady(ctx); err != nil {
			return err
		}
	}
	for _, p := range s.livePods() {
		s.delete(ctx, p)
	}
	for _, n := range s.c.LiveNodes() {
		pods, err := n.Agent.Pods(ctx)
		if err != nil {
			return err
		}
		s.res.RecordsBeforeGC += len(pods)
		s.op("GC")
		if err := s.c.GC(ctx, n, nil); err != nil {
			return err
		}
	}
	idleStart := time.Now()
	findings, _ := s.c.WaitIdle(ctx)
	s.res.IdleSeconds = time.Since(idleStart).Seconds()
	for _, f := range findings {
		s.violate(InvIdle, "%s", f)
	}
	return s.endRecords(ctx)
}

// endRecords checks etcd's records against EC2's tagged ENIs, the open
// intents, and `allotctl check`.
func (s *soak) endRecords(ctx context.Context) error {
	recs, _, err := s.c.BrokerFootprint(ctx)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, f := range recs {
		for _, e := range f.ENIs {
			known[e.ID] = true
		}
	}
	for _, e := range s.c.OurENIs() {
		if !known[e.ID] {
			s.violate(InvUnknownENI, "ENI %s (%s) is tagged ours in EC2 but not in the broker's records", e.ID, e.Status)
		}
	}
	st, err := s.c.Broker.Admin.GetStatus(ctx, &allotv1.GetStatusRequest{})
	if err != nil {
		return fmt.Errorf("broker GetStatus: %w", err)
	}
	if st.GetOpenIntents() > 0 {
		s.violate(InvOpenIntent, "%d intents open", st.GetOpenIntents())
	}
	// A check that could not run (a connection cut under it) is run
	// again, as an operator would. An unclean verdict is also asked again
	// for up to checkBound: an agent's usage report can trail a release
	// the broker just finished by a report interval. Only a verdict that
	// stays unclean counts.
	var table string
	var clean bool
	start := time.Now()
	for tries := 0; ; tries++ {
		table, clean, err = s.c.Check(ctx)
		if err != nil {
			s.log.Warn("allotctl check did not run", "err", err)
			if tries >= 3 {
				return err
			}
		}
		if clean || time.Since(start) > checkBound {
			break
		}
		sleep(ctx, 2*time.Second)
	}
	s.res.CheckSeconds = time.Since(start).Seconds()
	if !clean {
		s.violate(InvCheck, "%s", table)
	}
	return nil
}
