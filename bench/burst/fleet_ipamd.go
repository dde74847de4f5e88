package burst

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/bench/burst/ipamd"
)

// ipamdFleet is the baseline: every node's own ipamd calling EC2.
type ipamdFleet struct {
	cfg    Config
	mode   daemon.Mode
	tuning ipamd.Tuning
	ec2URL string
	limits pool.Limits
	hc     *http.Client

	nodes []*ipamd.Node
	// restarts counts nodeInit failures that made a node's ipamd exit and
	// be restarted after kubelet's CrashLoopBackOff.
	restarts atomic.Int64
	runCtx   context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// newIPAMDFleet returns an empty baseline fleet with the variant's
// configuration; join adds nodes to it.
func newIPAMDFleet(ctx context.Context, cfg Config, v Variant, ec2URL string) (*ipamdFleet, error) {
	limits, ok := catalogLimits(cfg.InstanceType)
	if !ok {
		return nil, fmt.Errorf("instance type %s: limits unknown", cfg.InstanceType)
	}
	base := ipamd.DefaultTuning()
	base.SubnetDiscovery = cfg.SubnetDiscovery
	tuning, err := ipamd.ParseTuning(base, v.Tuning)
	if err != nil {
		return nil, err
	}
	// One transport for all nodes: hundreds of SDK clients each keeping
	// their own idle connections would run loopback out of ports; EC2's
	// throttling is per account, not per connection, so nothing changes.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 512, 512
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &ipamdFleet{cfg: cfg, mode: v.Mode, tuning: tuning, ec2URL: ec2URL, limits: limits, hc: &http.Client{Transport: tr},
		runCtx: runCtx, cancel: cancel}, nil
}

// join starts an ipamd per instance: nodeInit now (restarted with
// kubelet's back-off while it fails, as aws-node is), the pool manager in
// the background.
func (f *ipamdFleet) join(ctx context.Context, insts []awssim.AdminInstance) error {
	nodes := make([]*ipamd.Node, len(insts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i, inst := range insts {
		g.Go(func() error {
			nc := ipamd.Config{
				InstanceID: inst.ID, IMDSEndpoint: inst.IMDSEndpoint, EC2Endpoint: f.ec2URL,
				HTTPClient: f.hc,
				PrefixMode: f.mode == daemon.ModePrefix,
				MaxENIs:    f.limits.MaxENIs,
				IPv4PerENI: f.limits.IPv4PerENI,
				// eni-max-pods.txt: ENIs x (addresses per ENI - 1) + 2.
				MaxPods:     f.limits.MaxENIs*(f.limits.IPv4PerENI-1) + 2,
				MaxAttempts: f.cfg.BaselineMaxAttempts,
				TimeScale:   f.cfg.TimeScale,
				Logger:      f.cfg.Logger,
			}
			f.tuning.Apply(&nc)
			n, err := ipamd.New(nc)
			if err != nil {
				return err
			}
			if _, err := n.StartSupervised(gctx, func(err error) {
				f.restarts.Add(1)
				f.cfg.Logger.Warn("ipamd nodeInit failed; restarting after back-off", "instance", inst.ID, "err", err)
			}); err != nil {
				return fmt.Errorf("ipamd %s: %w", inst.ID, err)
			}
			nodes[i] = n
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, n := range nodes {
		f.nodes = append(f.nodes, n)
		f.wg.Go(func() { n.Run(f.runCtx) })
	}
	return nil
}

func (f *ipamdFleet) warmMissing() int {
	missing := 0
	for _, n := range f.nodes {
		if !n.Settled() {
			missing++
		}
	}
	return missing
}

func (f *ipamdFleet) describeMissing() string {
	for _, n := range f.nodes {
		if !n.Settled() {
			return n.String()
		}
	}
	return ""
}

func (f *ipamdFleet) backends() []cni {
	out := make([]cni, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n
	}
	return out
}

// poolActions returns each node's pool increases so far.
func (f *ipamdFleet) poolActions() []int64 {
	out := make([]int64, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.PoolActions()
	}
	return out
}

// errors sums the nodes' failed pool actions.
func (f *ipamdFleet) errors() map[string]int {
	out := map[string]int{}
	for _, n := range f.nodes {
		for k, v := range n.Errors() {
			out[k] += v
		}
	}
	return out
}

func (f *ipamdFleet) stop() {
	f.cancel()
	f.wg.Wait()
}
