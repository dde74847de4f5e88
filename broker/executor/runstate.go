package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// runState is what one Run keeps in memory. All of it can be lost: it only
// says which work this process has under way, so nothing is planned twice,
// and which addresses it delivered since each node last stated its demand.
type runState struct {
	cancel context.CancelCauseFunc
	q      *queue
	kick   chan struct{}
	// ledger is what was delivered to each node lately.
	ledger *ledger

	mu sync.Mutex // guards the fields below

	busy    map[string]int     // node -> tasks queued or running
	mine    map[string]bool    // open intents owned by a running task
	backoff map[string]backoff // node -> left alone until
	queued  map[string]int64   // subnet -> cost of planned actions not yet begun
	// unstarted counts admitted actions whose first call has not yet
	// asked its bucket for a token, by that bucket.
	unstarted map[ratelimit.Class]int
	// attaching and modifying count queued CreateAttach actions whose
	// Attach, and whose Modify, has not yet asked its bucket for a token.
	attaching, modifying int
	// wanting is when each node was first seen wanting addresses since it
	// last wanted none (only the round goroutine touches it).
	wanting map[string]time.Time
	// wantingBuf is the list a round's walk of the wanting nodes fills
	// (Engine.wanting), kept for the next round's (only the round
	// goroutine touches it).
	wantingBuf []wantingNode
	// wantsBuf is the list of a round's plannable nodes (wants.list), kept
	// for the next round's likewise.
	wantsBuf []want
	// wake is the timer that kicks a round when a gathered demand is due
	// (only the round goroutine touches it); wakeAt is when it fires.
	wake   *time.Timer
	wakeAt time.Time
	// intentsRead is when a round last started reading every open intent
	// (only the round goroutine touches it).
	intentsRead time.Time
	// surplusOf is each node's surplus as last worked out (only the round
	// goroutine touches it).
	surplusOf surplusMemo
	// nodes is each node's planner view as last built (only the round
	// goroutine touches it).
	nodes nodeMemo
	// surplus is when each node was first seen with a surplus (only the
	// round goroutine touches it).
	surplus map[string]time.Time
	// proposed is each node's last release proposal while its surplus
	// keeps its age (afterRelease). The proposals' writer adds to it while
	// Engine.proposing is set; the round reads it only when it is not.
	proposed map[string]string
}

type backoff struct {
	until    time.Time
	failures int
	// refused marks a back-off after a refusal that would repeat: another
	// of the node's tasks succeeding does not lift it.
	refused bool
}

func newRunState(cancel context.CancelCauseFunc) *runState {
	return &runState{
		cancel:    cancel,
		q:         newQueue(),
		kick:      make(chan struct{}, 1),
		busy:      map[string]int{},
		mine:      map[string]bool{},
		ledger:    newLedger(),
		backoff:   map[string]backoff{},
		surplus:   map[string]time.Time{},
		queued:    map[string]int64{},
		proposed:  map[string]string{},
		wanting:   map[string]time.Time{},
		surplusOf: surplusMemo{},
		nodes:     nodeMemo{},

		unstarted: map[ratelimit.Class]int{},
	}
}

// wakeIn makes sure a round runs within d (real time: the timer is a wake
// up, the round itself reads the configured clock).
func (rs *runState) wakeIn(d time.Duration) {
	at := time.Now().Add(d)
	if rs.wake != nil && !rs.wakeAt.After(at) && rs.wakeAt.After(time.Now()) {
		return
	}
	if rs.wake != nil {
		rs.wake.Stop()
	}
	rs.wakeAt = at
	rs.wake = time.AfterFunc(d, func() {
		select {
		case rs.kick <- struct{}{}:
		default:
		}
	})
}

// work runs tasks until ctx ends.
func (e *Engine) work(ctx context.Context, rs *runState) {
	for {
		t, ok := rs.q.pop(ctx)
		if !ok {
			return
		}
		e.count(func(s *Stats) { s.Started[t.kind]++ })
		err := runTask(ctx, t)
		e.count(func(s *Stats) {
			switch {
			case ctx.Err() != nil || errors.Is(err, errWait):
			case err != nil:
				s.Failed[t.kind]++
			default:
				s.Done[t.kind]++
			}
		})
		until := rs.finished(t, err, ctx.Err() != nil, e.cfg.Clock.Now(), e.cfg.FailureBackoff)
		if ctx.Err() == nil && ec2client.IsRefusal(err) {
			// Say why where the node's agent and allotctl see it.
			e.unmet.set(t.node, &reasoned{store.UnmetEC2Refused,
				fmt.Errorf("EC2 refused %s (not retried before %s): %w", t.kind, until.UTC().Format(time.RFC3339), err)})
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, errWait) {
			e.stopIfDeposed(rs, err)
			e.log.Warn("task failed", "instance", t.node, "task", t.kind, "err", err)
		}
		select {
		case rs.kick <- struct{}{}:
		default:
		}
	}
}

// finished ends a task: the node is no longer busy with it, and backs off
// after a failure (longer after each in a row) or while EC2 is not ready.
// A budget refusal backs nothing off: the next plan sees the budget as it
// is. A refusal that would only repeat (ec2client.IsRefusal) backs off for
// minutes (RefusalBackoff, doubling), not a loop of calls, and a task of
// the node that succeeds meanwhile (one planned with it) does not lift
// that. A task cut short by the run's end changes nothing but busy. It
// returns until when the node is left alone.
func (rs *runState) finished(t *task, err error, stopping bool, now time.Time, backoffFor time.Duration) time.Time {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case stopping:
	case errors.Is(err, errWait):
		rs.backoff[t.node] = backoff{until: now.Add(backoffFor)}
	case errors.Is(err, rpcerr.ErrBudgetExceeded):
	case ec2client.IsRefusal(err):
		b := rs.backoff[t.node]
		b.failures++
		b.until = now.Add(RefusalBackoff << min(b.failures-1, 3))
		b.refused = true
		rs.backoff[t.node] = b
	case err != nil:
		b := rs.backoff[t.node]
		b.failures++
		b.until = now.Add(backoffFor << min(b.failures-1, 4))
		rs.backoff[t.node] = b
	default:
		if b := rs.backoff[t.node]; !b.refused || !now.Before(b.until) {
			delete(rs.backoff, t.node)
		}
	}
	rs.busy[t.node]--
	if rs.busy[t.node] <= 0 {
		delete(rs.busy, t.node)
	}
	return rs.backoff[t.node].until
}

// RefusalBackoff is how long a node is left alone after EC2 refused one of
// its calls in a way that would repeat (ec2client.IsRefusal); it doubles
// with each further refusal, up to eight times.
const RefusalBackoff = 5 * time.Minute

// schedule queues fn as a task for node; the node counts as busy (and is
// not planned for) until the task ends.
func (rs *runState) schedule(node, kind string, urgent bool, fn func(ctx context.Context) error) {
	rs.scheduleFor(node, kind, urgent, "", fn)
}

// scheduleFor is schedule for a task that answers a demand stated in the
// trace context traceparent: the task's span links to it.
func (rs *runState) scheduleFor(node, kind string, urgent bool, traceparent string, fn func(ctx context.Context) error) {
	rs.mu.Lock()
	rs.busy[node]++
	rs.mu.Unlock()
	rs.q.push(&task{node: node, kind: kind, urgent: urgent, fn: fn, trace: traceparent})
}

// queue counts a planned action's budget as taken until its intent is
// begun, so a plan made meanwhile does not hand the same addresses out
// again; the returned func, called once the intent is written (or
// refused), gives it back, and counts the action as started in its first
// call's bucket (class; see admit), where it waits for its token next.
func (rs *runState) queue(subnet string, cost int64, class ratelimit.Class) func() {
	rs.mu.Lock()
	rs.queued[subnet] += cost
	rs.mu.Unlock()
	var once bool
	return func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if !once {
			once = true
			rs.queued[subnet] -= cost
			if rs.unstarted[class] > 0 {
				rs.unstarted[class]--
			}
		}
	}
}

// chain counts a queued CreateAttach action as one Attach and one Modify
// still to come. Each call's func is called once the call is about to ask
// its bucket for a token, its intent written (or the action ended before
// it), and takes the call off: until then the planner counts it against
// that bucket, and an intent write takes a while during a burst.
func (rs *runState) chain() chained {
	rs.mu.Lock()
	rs.attaching++
	rs.modifying++
	rs.mu.Unlock()
	return chained{attach: rs.countDown(&rs.attaching), modify: rs.countDown(&rs.modifying)}
}

// chained is what runState.chain returns: attach and modify take a new
// ENI's Attach and its Modify off the calls still to come.
type chained struct{ attach, modify func() }

// attachAsks takes the Attach off, if c counts one.
func (c chained) attachAsks() {
	if c.attach != nil {
		c.attach()
	}
}

// modifyAsks takes the Modify off, if c counts one.
func (c chained) modifyAsks() {
	if c.modify != nil {
		c.modify()
	}
}

// countDown returns a func that takes one off *n, the first time only.
func (rs *runState) countDown(n *int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			rs.mu.Lock()
			*n--
			rs.mu.Unlock()
		})
	}
}

// notAsked is how many calls committed to bucket c have not yet asked it
// for a token: admitted actions not yet started, and for the Attach and
// Modify buckets the new ENIs whose Attach, or Modify, has not. rs.mu is
// held.
func (rs *runState) notAsked(c ratelimit.Class) int {
	switch c {
	case ratelimit.ClassOf(planner.CallAttach, true):
		return rs.attaching
	case ratelimit.ClassOf(planner.CallModify, true):
		return rs.modifying
	}
	return rs.unstarted[c]
}

// queuedCost is the budget of planned actions not yet begun, by subnet.
func (rs *runState) queuedCost() map[string]int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make(map[string]int64, len(rs.queued))
	for k, v := range rs.queued {
		out[k] = v
	}
	return out
}

// idle reports whether node has no task and is not backing off.
func (rs *runState) idle(node string, now time.Time) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.busy[node] == 0 && !now.Before(rs.backoff[node].until)
}

// notIdle is the nodes that are not idle now (idle), read under one
// lock: a round asks about each of thousands of nodes, and each asking
// under the lock the workers take at every step of their calls made the
// round wait on them.
func (rs *runState) notIdle(now time.Time) map[string]bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make(map[string]bool, len(rs.busy)+len(rs.backoff))
	for n := range rs.busy {
		out[n] = true
	}
	for n, b := range rs.backoff {
		if now.Before(b.until) {
			out[n] = true
		}
	}
	return out
}

// busyNodes is the nodes with a task queued or running.
func (rs *runState) busyNodes() map[string]bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := make(map[string]bool, len(rs.busy))
	for n := range rs.busy {
		out[n] = true
	}
	return out
}

// own marks an intent as held by a running task (or releases it), so the
// round does not try to resolve it meanwhile.
func (rs *runState) own(intentID string, mine bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if mine {
		rs.mine[intentID] = true
	} else {
		delete(rs.mine, intentID)
	}
}

// owned reports whether a running task holds the intent.
func (rs *runState) owned(intentID string) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.mine[intentID]
}

// deliver records n addresses added to node at time at.
func (e *Engine) deliver(rs *runState, node, key string, n int, at time.Time) {
	rs.ledger.add(node, key, n, at)
	e.count(func(s *Stats) { s.Delivered += int64(n) })
}

// remember records a delivery without counting it (one a previous leader
// made).
func (e *Engine) remember(rs *runState, node, key string, n int, at time.Time) {
	rs.ledger.add(node, key, n, at)
}

// undeliver takes back a delivery whose ENI was deleted before it reached
// the node.
func (e *Engine) undeliver(rs *runState, node, key string) {
	if n, ok := rs.ledger.remove(node, key); ok {
		e.count(func(s *Stats) { s.Delivered -= int64(n) })
	}
}

// deliveredSince returns the addresses delivered to node after its demand
// was stated at t (see ledger.since).
func (e *Engine) deliveredSince(rs *runState, node string, t time.Time) int {
	return rs.ledger.since(node, t)
}

// tracer makes a span of every task, parent of its EC2 calls' spans. It
// is the process's global provider (allot-broker installs the OTLP one).
var tracer = otel.Tracer("github.com/allotnet/allot/broker/executor")

// runTask runs t under its span.
func runTask(ctx context.Context, t *task) error {
	opts := []trace.SpanStartOption{trace.WithAttributes(
		attribute.String("allot.node", t.node), attribute.Bool("allot.urgent", t.urgent))}
	if t.trace != "" {
		demand := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": t.trace})
		if sc := trace.SpanContextFromContext(demand); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
				Attributes: []attribute.KeyValue{attribute.String("allot.link", "demand")}}))
		}
	}
	ctx, span := tracer.Start(ctx, "allot "+t.kind, opts...)
	defer span.End()
	err := t.fn(ctx)
	if err != nil && !errors.Is(err, errWait) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
