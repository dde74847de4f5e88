package burst

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/cni/plugin"
)

// cni is what a pod's sandbox setup calls on its node: the agent's CNI
// Backend for allot (the very methods cniserver calls), the ipamd model's
// handler for the baseline.
type cni interface {
	Add(ctx context.Context, req cniserver.Request) (cniserver.AddResult, error)
	Del(ctx context.Context, req cniserver.Request) error
}

// kubeletModel is how kubelet and the runtime retry a pod whose sandbox
// failed. A failed RunPodSandbox makes the runtime tear the sandbox down
// (CNI DEL) and kubelet's pod worker requeue the pod after
// wait.Jitter(backOffPeriod, 0.5) = 10 to 15 s (pkg/kubelet/kubelet.go
// backOffPeriod, pod_workers.go workerBackOffPeriodJitterFactor); the next
// sync creates a new sandbox, with a new container ID. There is no
// exponential growth for sandbox failures. kubelet bounds RunPodSandbox,
// the call that runs the CNI ADD, by twice its --runtime-request-timeout
// (k8s.io/cri-client remote_runtime.go): 4 min by default. The CNI plugin's
// own ADD timeout, shorter, is the plugin's business (pluginBound).
type kubeletModel struct {
	// Backoff and Jitter are simulated; Scale turns them into wall time.
	Backoff time.Duration
	Jitter  float64
	// RuntimeRequestTimeout is kubelet's --runtime-request-timeout,
	// simulated.
	RuntimeRequestTimeout time.Duration
	Scale                 float64
}

func defaultKubelet(scale float64) kubeletModel {
	return kubeletModel{Backoff: 10 * time.Second, Jitter: 0.5, RuntimeRequestTimeout: plugin.RuntimeRequestTimeout, Scale: scale}
}

func (k kubeletModel) wall(d time.Duration) time.Duration { return time.Duration(float64(d) / k.Scale) }

// sandboxTimeout bounds one RunPodSandbox, in wall time.
func (k kubeletModel) sandboxTimeout() time.Duration { return k.wall(2 * k.RuntimeRequestTimeout) }

// pluginBound is a node's CNI as allot's plugin calls it: each ADD bounded
// by the plugin's ADD timeout (the netconf's, its default here, in wall
// time); past it the plugin answers "try again later", as the agent would
// have AgentMargin earlier.
type pluginBound struct {
	cni
	timeout time.Duration
}

func (b pluginBound) Add(ctx context.Context, req cniserver.Request) (cniserver.AddResult, error) {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	return b.cni.Add(ctx, req)
}

// retryDelay is one requeue delay in wall time.
func (k kubeletModel) retryDelay() time.Duration {
	return k.wall(k.Backoff + time.Duration(rand.Float64()*k.Jitter*float64(k.Backoff)))
}

// podResult is one pod's outcome.
type podResult struct {
	Node     int
	Pod      int
	Addr     netip.Addr
	ENIID    string
	Attempts int
	Placed   bool
	// TTA is wall time from the pod's request to the successful ADD's
	// return; Done is wall time from the burst's start to that return.
	TTA  time.Duration
	Done time.Duration
}

// hotPathKey tags the context of every ADD, so a wrapped broker client can
// tell whether a broker call was made on an ADD's behalf.
type hotPathKey struct{}

// failures counts failed ADD attempts by gRPC code name.
type failures struct {
	mu sync.Mutex
	m  map[string]int
}

func (f *failures) add(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]int{}
	}
	f.m[cniserver.Code(err).String()]++
}

func (f *failures) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.m {
		out[k] = v
	}
	return out
}

// sandboxID is a container ID as the runtime makes them: 64 hex digits,
// new for every attempt.
func sandboxID(node, pod, attempt int) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%d/%d/%d", node, pod, attempt))
	return hex.EncodeToString(h[:])
}

// podRequest is the CNI request of one attempt at a pod's sandbox, as the
// runtime sends it for both the ADD and the DEL.
func podRequest(node, pod, attempt int) cniserver.Request {
	id := sandboxID(node, pod, attempt)
	return cniserver.Request{
		Attachment:   cniserver.Attachment{Network: "allot", ContainerID: id, IfName: "eth0"},
		NetNS:        "/var/run/netns/cni-" + id[:32],
		CNIVersion:   "1.1.0",
		PodNamespace: "burst",
		PodName:      fmt.Sprintf("burst-%d-%d", node, pod),
	}
}

// runPod sets up one pod's sandbox on node, requested at requested,
// retrying as kubelet does, until it has an address or ctx ends.
func runPod(ctx context.Context, k kubeletModel, b cni, node, pod int, requested, start time.Time, fails *failures) podResult {
	r := podResult{Node: node, Pod: pod}
	for ctx.Err() == nil {
		r.Attempts++
		req := podRequest(node, pod, r.Attempts)
		actx, cancel := context.WithTimeout(context.WithValue(ctx, hotPathKey{}, true), k.sandboxTimeout())
		res, err := b.Add(actx, req)
		cancel()
		if err == nil {
			r.Placed, r.TTA, r.Done, r.Addr, r.ENIID = true, time.Since(requested), time.Since(start), res.Address.Addr(), res.ENIID
			return r
		}
		if ctx.Err() != nil {
			break
		}
		fails.add(err)
		// The runtime tears the failed sandbox down before kubelet tries
		// again with a new one.
		_ = b.Del(ctx, req)
		select {
		case <-ctx.Done():
		case <-time.After(k.retryDelay()):
		}
	}
	return r
}
