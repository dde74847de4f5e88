package executor

import (
	"math"
	"time"

	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/ratelimit"
)

// limited is an EC2 client that shows the token buckets it paces its calls
// with (ec2client.Client does). Against one that doesn't, every planned
// action is queued at once.
type limited interface {
	Limiter() *ratelimit.Limiter
}

// limiter is the EC2 client's rate limiter, or nil if it shows none.
func (e *Engine) limiter() *ratelimit.Limiter {
	if src, ok := e.ec2.(limited); ok {
		return src.Limiter()
	}
	return nil
}

// firstClass is the bucket an action's first call draws from: the one
// whose token decides when the action can start.
func firstClass(a planner.Action) ratelimit.Class {
	if a.Kind == planner.CreateAttach {
		return ratelimit.ClassOf(planner.CallCreate, true)
	}
	return ratelimit.ClassOf(planner.CallAssign, true)
}

// admit returns the plan's actions the buckets can start within Lookahead,
// in plan order; the rest are left for a later round, and the returned
// duration says when one more token will be there (0 when nothing was left
// out). A new ENI needs a token of its Create's bucket and one of its
// Attach's, the smaller: admitted by the Create bucket alone, new ENIs
// would run ahead of their Attaches while the Assigns kept pace, and the
// mix the planner chose would not be the one carried out.
//
// An action is bound to a node's demand when it is planned. Queued behind a
// long wait for tokens, it would carry out a demand that went on growing
// meanwhile (pods of a burst keep arriving), and what grew would cost a
// call of its own afterwards. Planned only when its token is near, it sees
// the demand as it is by then, in one call. The buckets lose nothing by
// it: actions are admitted ahead of the tokens by Lookahead, and every
// task's end and every tick plans again.
func (e *Engine) admit(rs *runState, actions []planner.Action) ([]planner.Action, time.Duration) {
	lim := e.limiter()
	if lim == nil {
		return actions, 0
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	attach := ratelimit.ClassOf(planner.CallAttach, true)
	allow := map[ratelimit.Class]float64{}
	var out []planner.Action
	var retry time.Duration
	for _, a := range actions {
		classes := []ratelimit.Class{firstClass(a)}
		if a.Kind == planner.CreateAttach {
			classes = append(classes, attach)
		}
		room := true
		for _, c := range classes {
			n, seen := allow[c]
			if !seen {
				n = math.Floor(lim.Tokens(c)+lim.Bucket(c).Refill*e.cfg.Lookahead.Seconds()) - float64(rs.notAsked(c))
				allow[c] = n
			}
			if n < 1 {
				room = false
				if r := lim.Bucket(c).Refill; r > 0 {
					retry = minPositive(retry, time.Duration(float64(time.Second)/r))
				}
			}
		}
		if !room {
			continue
		}
		for _, c := range classes {
			allow[c]--
		}
		rs.unstarted[classes[0]]++
		out = append(out, a)
	}
	return out, retry
}

// buckets is the planner's view of the buckets its actions draw from: each
// one's tokens now (negative while calls wait for one on credit) and the
// calls committed to it that have not yet asked: admitted actions not yet
// started, and the Attach and Modify of every new ENI queued or under way
// that has not reached its Attach. Against an EC2 client that shows no
// limiter, EC2's own table with full buckets.
func (e *Engine) buckets(rs *runState) planner.Buckets {
	lim := e.limiter()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	bucket := func(action string) planner.Bucket {
		c := ratelimit.ClassOf(action, true)
		queued := rs.notAsked(c)
		if lim == nil {
			b := ratelimit.BucketOf(c)
			return planner.Bucket{Tokens: float64(b.Size), Refill: b.Refill, Queued: queued}
		}
		return planner.Bucket{Tokens: lim.Tokens(c), Refill: lim.Bucket(c).Refill, Queued: queued}
	}
	return planner.Buckets{
		Assign:    bucket(planner.CallAssign),
		Create:    bucket(planner.CallCreate),
		Attach:    bucket(planner.CallAttach),
		Modify:    bucket(planner.CallModify),
		NewENILag: e.cfg.NewENILag.Seconds(), // wall time, as the limiter's refill
	}
}

// tokensSpare reports whether the tokens in hand, less those committed to
// admitted actions not yet asked, would pay two calls for each of the
// waiting idle nodes with pods waiting: one for its demand as it stands
// and one for what its pods still to come may add. Then gathering a demand buys nothing, and it
// costs the pods the gather: the call the gather would save comes from
// tokens no one else needs now. When the buckets are the constraint (a
// burst larger than the tokens in hand) it reports false and demands
// gather as before. An Assign or a new ENI (its Create and its Attach)
// each serves a node, so both count. Against an EC2 client that shows no
// limiter it reports false.
func (e *Engine) tokensSpare(rs *runState, waiting int) bool {
	lim := e.limiter()
	if lim == nil || waiting == 0 {
		return false
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	inHand := func(action string) float64 {
		c := ratelimit.ClassOf(action, true)
		return math.Floor(lim.Tokens(c)) - float64(rs.notAsked(c))
	}
	spare := max(inHand(planner.CallAssign), 0) + max(min(inHand(planner.CallCreate), inHand(planner.CallAttach)), 0)
	return spare >= float64(2*waiting)
}
