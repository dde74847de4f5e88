package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sync"
	"sync/atomic"
	"time"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultMaxAgentCalls is how many of the agents' calls that read or write
// etcd (every NodeService call but Heartbeat and the WatchNode stream) the
// broker runs at once unless told otherwise. With etcd answering in
// milliseconds a 5,000-node burst goes past it only in its first seconds,
// when every agent states its demand at once, and has tens in flight
// after; the bound is for when etcd slows down and calls would otherwise
// wait, each with its goroutine and request, for as long as their agents
// do and then some.
const DefaultMaxAgentCalls = 1024

// busyLogEvery is how often refusals are summed up in one log record.
const busyLogEvery = 10 * time.Second

// callGate bounds the agents' calls the broker runs at once, two ways:
//
//   - one call of each kind per node. An agent makes its calls one after
//     another, so a second SetDemand of a node while the first still runs
//     means the first was given up by its agent (its deadline passed) and
//     is still held up in the broker; the newer one is refused until the
//     older one ends, so a slow etcd cannot make a node's calls pile up.
//   - at most max calls that read or write etcd (all but Heartbeat), over
//     every node.
//
// A refused call ends at once with codes.Unavailable and a message that
// says the broker is busy: the agent tries again later, with backoff and
// jitter (agent/brokerlink). Register is bounded only by the total: the
// agent may register from two places at once (its session and a re-read of
// its record), which is harmless.
type callGate struct {
	max int // <= 0: no total bound
	log *slog.Logger
	now func() time.Time

	mu       sync.Mutex
	inFlight int
	byNode   map[nodeCall]struct{}

	refused   atomic.Int64 // since the last summary
	lastLog   atomic.Int64 // unix nanoseconds of the last summary
	totalRefs atomic.Int64 // since the start
}

// nodeCall is one kind of call of one node.
type nodeCall struct{ node, method string }

func newCallGate(max int, log *slog.Logger, now func() time.Time) *callGate {
	return &callGate{max: max, log: log, now: now, byNode: map[nodeCall]struct{}{}}
}

// Gated methods: those held to one at a time per node, and those counted
// against the total.
var (
	perNodeMethods = map[string]bool{
		allotv1.NodeService_SetDemand_FullMethodName:   true,
		allotv1.NodeService_ReportUsage_FullMethodName: true,
		allotv1.NodeService_AckRelease_FullMethodName:  true,
		allotv1.NodeService_Heartbeat_FullMethodName:   true,
	}
	countedMethods = map[string]bool{
		allotv1.NodeService_Register_FullMethodName:    true,
		allotv1.NodeService_SetDemand_FullMethodName:   true,
		allotv1.NodeService_ReportUsage_FullMethodName: true,
		allotv1.NodeService_AckRelease_FullMethodName:  true,
	}
)

// busyError is a call the gate refused. It carries its own gRPC status, so
// the error table passes it through, and the call log knows it apart.
type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }

func (e *busyError) GRPCStatus() *status.Status { return status.New(codes.Unavailable, e.msg) }

// isBusy reports whether err is a refusal of the gate.
func isBusy(err error) bool {
	var busy *busyError
	return errors.As(err, &busy)
}

// enter admits a call of method for node, or refuses it; release must be
// called when an admitted call ends.
func (g *callGate) enter(node, method string) (release func(), err error) {
	perNode := perNodeMethods[method] && node != ""
	counted := countedMethods[method] && g.max > 0
	if !perNode && !counted {
		return func() {}, nil
	}
	key := nodeCall{node, method}
	g.mu.Lock()
	if _, held := g.byNode[key]; perNode && held {
		g.mu.Unlock()
		return nil, g.refuse(fmt.Sprintf("broker busy: an earlier %s call of node %s is still in progress; retry with backoff",
			shortMethod(method), node))
	}
	if counted && g.inFlight >= g.max {
		n := g.inFlight
		g.mu.Unlock()
		return nil, g.refuse(fmt.Sprintf("broker busy: %d agent calls in progress, the most it runs at once; retry with backoff", n))
	}
	if perNode {
		g.byNode[key] = struct{}{}
	}
	if counted {
		g.inFlight++
	}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		if perNode {
			delete(g.byNode, key)
		}
		if counted {
			g.inFlight--
		}
		g.mu.Unlock()
	}, nil
}

// refuse counts a refusal and logs a summary at most every busyLogEvery:
// a refusal per record would make the refused calls queue on the log.
func (g *callGate) refuse(msg string) error {
	g.refused.Add(1)
	g.totalRefs.Add(1)
	now := g.now().UnixNano()
	if last := g.lastLog.Load(); now-last >= int64(busyLogEvery) && g.lastLog.CompareAndSwap(last, now) {
		g.log.Warn("agent calls refused while the broker is busy; agents retry with backoff",
			"refused", g.refused.Swap(0), "last", msg)
	}
	return &busyError{msg: msg}
}

// Refused is how many agent calls the gate has refused since the start.
func (g *callGate) Refused() int64 { return g.totalRefs.Load() }

// unary is the gate as an interceptor. It runs after authentication, so
// only calls the broker would serve take a place.
func (g *callGate) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	release, err := g.enter(callerNode(req), info.FullMethod)
	if err != nil {
		return nil, err
	}
	defer release()
	return handler(ctx, req)
}

// callerNode is the instance ID a node request names, "" for others.
func callerNode(req any) string {
	switch r := req.(type) {
	case interface{ GetInstanceId() string }:
		return r.GetInstanceId()
	case *allotv1.RegisterRequest:
		return r.GetNode().GetInstanceId()
	}
	return ""
}

// shortMethod is a full method name's last part.
func shortMethod(full string) string { return path.Base(full) }
