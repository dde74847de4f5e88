package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/broker/podnet"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
)

// State is what the cluster gauges read from etcd at each scrape
// (broker/store). Only the leading replica reads it, so the cluster's
// figures come from one place and are not summed over replicas.
type State interface {
	// ReadPlanning sets aside records that do not decode, so one bad
	// record does not blank the cluster's gauges.
	ReadPlanning(ctx context.Context) (store.Planning, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	ListNodeStatus(ctx context.Context) (map[string]store.NodeStatus, error)
	Alive(ctx context.Context) (map[string]bool, error)
}

var _ State = (*store.Store)(nil)

// stateReadTimeout bounds the etcd reads of one scrape.
const stateReadTimeout = 5 * time.Second

type stateGauges struct {
	subnetAddrs, subnetHeadroom metric.Int64ObservableGauge
	azAddrs, azHeadroom         metric.Int64ObservableGauge
	nodes, waiting, shortfall   metric.Int64ObservableGauge
	intents                     metric.Int64ObservableGauge
	intentAge                   metric.Float64ObservableGauge
	readErrors                  metric.Int64ObservableCounter
}

func (g *stateGauges) create(m metric.Meter) error {
	var errs []error
	gauge := func(name, desc string) metric.Int64ObservableGauge {
		x, err := m.Int64ObservableGauge(name, metric.WithDescription(desc))
		errs = append(errs, err)
		return x
	}
	g.subnetAddrs = gauge("allot.broker.subnet.addresses", "Addresses of each subnet by kind: usable, limit (usable less "+
		"headroom, capped), attached, reserved (in flight), used_by_others, available, assigned (to pods), warm (free on nodes)")
	g.subnetHeadroom = gauge("allot.broker.subnet.headroom_pods", "Pods each subnet still fits: warm addresses plus what its "+
		"available addresses buy on the nodes registered in it")
	g.azAddrs = gauge("allot.broker.az.addresses", "allot.broker.subnet.addresses summed over each availability zone's subnets")
	g.azHeadroom = gauge("allot.broker.az.headroom_pods", "allot.broker.subnet.headroom_pods summed over each availability zone")
	g.nodes = gauge("allot.broker.nodes", "Registered nodes by status: ok, or why their demand is unmet "+
		"(budget_exhausted, node_full, not_ready); and by liveness (alive true or false)")
	g.waiting = gauge("allot.broker.demand.pods_waiting", "ADDs waiting for an address on all nodes, as their agents last stated")
	g.shortfall = gauge("allot.broker.demand.warm_shortfall", "Addresses the nodes lack to reach their warm targets")
	g.intents = gauge("allot.broker.intents.open", "EC2 calls begun and not yet resolved (open intents), by kind")
	age, err := m.Float64ObservableGauge("allot.broker.intents.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest open intent, by kind"))
	errs = append(errs, err)
	g.intentAge = age
	rerr, err := m.Int64ObservableCounter("allot.broker.state.read_errors",
		metric.WithDescription("Scrapes whose cluster gauges could not be read from etcd"))
	errs = append(errs, err)
	g.readErrors = rerr
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster gauges: %w", err)
	}
	return nil
}

func (g *stateGauges) all() []metric.Observable {
	return []metric.Observable{g.subnetAddrs, g.subnetHeadroom, g.azAddrs, g.azHeadroom, g.nodes,
		g.waiting, g.shortfall, g.intents, g.intentAge, g.readErrors}
}

// registerState creates the cluster gauges; they report only while lead
// says this replica leads.
func registerState(m metric.Meter, st State, lead Leader, now func() time.Time) error {
	var g stateGauges
	if err := g.create(m); err != nil {
		return err
	}
	var failed atomic.Int64
	_, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if lead != nil && !lead.IsLeader() {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, stateReadTimeout)
		defer cancel()
		snap, err := readState(ctx, st)
		if err != nil {
			o.ObserveInt64(g.readErrors, failed.Add(1))
			return nil // one failed read must not hide the other metrics
		}
		o.ObserveInt64(g.readErrors, failed.Load())
		g.observe(o, snap, now())
		return nil
	}, g.all()...)
	if err != nil {
		return fmt.Errorf("register cluster gauges: %w", err)
	}
	return nil
}

// stateSnap is one scrape's read of the cluster.
type stateSnap struct {
	subnets  []store.Subnet
	nodes    []store.Node
	enis     []store.ENI
	usage    map[string]store.Usage
	demands  map[string]store.Demand
	intents  []store.Intent
	statuses map[string]store.NodeStatus
	alive    map[string]bool
	// badNodes are instances whose registration does not decode.
	badNodes []string
	// podNodes are the nodes each in the subnet its pods go to, and
	// closed the primary ENIs that take no pods (podnet.AtHome), for the
	// subnet figures.
	podNodes []store.Node
	closed   map[string]bool
}

func readState(ctx context.Context, st State) (stateSnap, error) {
	var s stateSnap
	var errs [8]error
	var p store.Planning
	p, errs[0] = st.ReadPlanning(ctx)
	s.subnets, s.nodes, s.usage, s.demands = p.Subnets, p.Nodes, p.Usage, p.Demands
	s.podNodes, s.closed = podnet.AtHome(p.PodNetworks, p.Nodes, p.Subnets)
	for _, q := range p.Quarantined {
		if q.Kind == "nodes" {
			s.badNodes = append(s.badNodes, q.ID)
		}
	}
	s.enis, errs[2] = st.ListENIs(ctx)
	s.intents, errs[5] = st.ListOpenIntents(ctx)
	s.statuses, errs[6] = st.ListNodeStatus(ctx)
	s.alive, errs[7] = st.Alive(ctx)
	return s, errors.Join(errs[:]...)
}

func (g *stateGauges) observe(o metric.Observer, s stateSnap, now time.Time) {
	az := map[string]map[string]int64{}
	azHead := map[string]int64{}
	for _, sn := range s.subnets {
		f := server.Figures(sn, s.podNodes, s.enis, s.usage, s.closed)
		kinds := map[string]int64{
			"usable": f.Usable, "limit": f.Limit, "attached": f.Attached, "reserved": f.Reserved,
			"used_by_others": f.UsedByOthers, "available": f.Available, "assigned": f.Assigned, "warm": f.Warm,
		}
		if az[sn.AvailabilityZone] == nil {
			az[sn.AvailabilityZone] = map[string]int64{}
		}
		for k, v := range kinds {
			o.ObserveInt64(g.subnetAddrs, v, metric.WithAttributes(
				attribute.String("subnet", sn.ID), attribute.String("az", sn.AvailabilityZone), attribute.String("kind", k)))
			az[sn.AvailabilityZone][k] += v
		}
		o.ObserveInt64(g.subnetHeadroom, f.HeadroomPods, metric.WithAttributes(
			attribute.String("subnet", sn.ID), attribute.String("az", sn.AvailabilityZone)))
		azHead[sn.AvailabilityZone] += f.HeadroomPods
	}
	for zone, kinds := range az {
		for k, v := range kinds {
			o.ObserveInt64(g.azAddrs, v, metric.WithAttributes(attribute.String("az", zone), attribute.String("kind", k)))
		}
		o.ObserveInt64(g.azHeadroom, azHead[zone], metric.WithAttributes(attribute.String("az", zone)))
	}
	g.observeNodes(o, s)
	g.observeIntents(o, s, now)
}

func (g *stateGauges) observeNodes(o metric.Observer, s stateSnap) {
	byStatus := map[[2]string]int64{}
	var waiting, short int64
	for _, n := range s.nodes {
		status := "ok"
		if st, ok := s.statuses[n.InstanceID]; ok {
			status = st.Reason
		}
		alive := "false"
		if s.alive[n.InstanceID] {
			alive = "true"
		}
		byStatus[[2]string{status, alive}]++
		if d, ok := s.demands[n.InstanceID]; ok {
			waiting += int64(d.Pending)
			short += int64(d.WarmShortfall)
		}
	}
	for _, id := range s.badNodes {
		byStatus[[2]string{store.UnmetQuarantined, fmt.Sprint(s.alive[id])}]++
	}
	for k, v := range byStatus {
		o.ObserveInt64(g.nodes, v, metric.WithAttributes(attribute.String("status", k[0]), attribute.String("alive", k[1])))
	}
	o.ObserveInt64(g.waiting, waiting)
	o.ObserveInt64(g.shortfall, short)
}

// intentKinds are reported even at zero, so an alert on them has a series.
var intentKinds = []string{store.IntentCreate, store.IntentAttach, store.IntentModify, store.IntentAssign,
	store.IntentUnassign, store.IntentDetach, store.IntentDelete}

func (g *stateGauges) observeIntents(o metric.Observer, s stateSnap, now time.Time) {
	count := map[string]int64{}
	oldest := map[string]time.Time{}
	for _, in := range s.intents {
		count[in.Kind]++
		if t, ok := oldest[in.Kind]; !ok || in.CreatedAt.Before(t) {
			oldest[in.Kind] = in.CreatedAt
		}
	}
	for _, k := range intentKinds {
		kind := metric.WithAttributes(attribute.String("kind", k))
		o.ObserveInt64(g.intents, count[k], kind)
		age := 0.0
		if t, ok := oldest[k]; ok {
			age = max(now.Sub(t).Seconds(), 0)
		}
		o.ObserveFloat64(g.intentAge, age, kind)
	}
}
