package burst

import (
	"context"
	"fmt"
	"net/http"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/bench/burst/cilium"
)

// ciliumFleet is the other central design: Cilium's operator calling EC2
// for every node, the nodes' agents taking addresses from its pools.
type ciliumFleet struct {
	op     *cilium.Operator
	tuning cilium.Tuning
	nodes  []*cilium.Node
}

// newCiliumFleet starts the operator with the variant's configuration; join
// adds nodes to it.
func newCiliumFleet(ctx context.Context, cfg Config, v Variant, ec2URL string) (*ciliumFleet, error) {
	limits, ok := catalogLimits(cfg.InstanceType)
	if !ok {
		return nil, fmt.Errorf("instance type %s: limits unknown", cfg.InstanceType)
	}
	tuning, err := cilium.ParseTuning(cilium.DefaultTuning(), v.Tuning)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 64, 64
	oc := cilium.Config{
		EC2Endpoint: ec2URL, HTTPClient: &http.Client{Transport: tr},
		PrefixDelegation: v.Mode == daemon.ModePrefix,
		MaxENIs:          limits.MaxENIs, IPv4PerENI: limits.IPv4PerENI,
		TimeScale: cfg.TimeScale, Logger: cfg.Logger,
	}
	tuning.Apply(&oc)
	op, err := cilium.New(ctx, oc)
	if err != nil {
		return nil, err
	}
	return &ciliumFleet{op: op, tuning: tuning}, nil
}

func (f *ciliumFleet) join(_ context.Context, insts []awssim.AdminInstance) error {
	for _, inst := range insts {
		f.nodes = append(f.nodes, f.op.AddNode(inst.ID))
	}
	return nil
}

func (f *ciliumFleet) warmMissing() int {
	missing := 0
	for _, n := range f.nodes {
		if !n.Settled() {
			missing++
		}
	}
	return missing
}

func (f *ciliumFleet) describeMissing() string {
	for _, n := range f.nodes {
		if !n.Settled() {
			return n.String()
		}
	}
	return ""
}

func (f *ciliumFleet) backends() []cni {
	out := make([]cni, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n
	}
	return out
}

// limiterTerm is the operator's client-side limiter as a floor: calls
// operations through a bucket of Burst tokens refilled at QPS.
func (f *ciliumFleet) limiterTerm(calls int64) floorTerm {
	by := fmt.Sprintf("client limiter, %g/s", f.tuning.QPS)
	over := float64(calls) - float64(f.tuning.Burst)
	if over <= 0 {
		return floorTerm{by: by}
	}
	return floorTerm{by: by, sim: secondsDuration(over / f.tuning.QPS)}
}

func (f *ciliumFleet) stop() { f.op.Stop() }
