package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// Intent ID prefixes say which part of the leader wrote an intent, so the
// engine does not resolve the reconciler's intents while it is still
// working on them.
const (
	ExecutorIntentPrefix   = "x"
	ReconcilerIntentPrefix = "r"
)

// TagClientToken is the tag carrying the ClientToken (the create intent's
// ID) of a created ENI: EC2 does not return the token when describing, and
// this is how a new leader finds the ENI a crashed one created.
const TagClientToken = "allot.dev/client-token"

// NewIntentID returns a random intent ID with the given prefix. It doubles
// as the ClientToken of a create (at most 64 ASCII characters).
func NewIntentID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// begin writes an intent (reserving its budget) before an EC2 call. The
// intent is marked as this run's from before it exists until the task ends,
// so the round never resolves it under the task.
func (e *Engine) begin(ctx context.Context, rs *runState, in store.Intent) (store.Intent, error) {
	if in.ID == "" {
		in.ID = NewIntentID(ExecutorIntentPrefix)
	}
	rs.own(in.ID, true)
	got, err := e.st.BeginIntent(ctx, in)
	if err != nil {
		rs.own(in.ID, false)
		e.stopIfDeposed(rs, err)
		var be *rpcerr.BudgetError
		if errors.As(err, &be) {
			e.count(func(s *Stats) { s.BudgetRefused++ })
			e.unmet.set(in.InstanceID, be)
		}
		return got, fmt.Errorf("begin %s intent for %s: %w", in.Kind, in.InstanceID, err)
	}
	return got, nil
}

// stopIfDeposed stops the run when the store refused a write because this
// broker no longer holds its election key: another replica may lead, and
// nothing more may be written or sent to EC2.
func (e *Engine) stopIfDeposed(rs *runState, err error) {
	if errors.Is(err, rpcerr.ErrNotLeader) {
		e.log.Error("lost leadership: store refused a fenced write; stopping", "err", err)
		rs.cancel(err)
	}
}

// fail records that an intent's EC2 call failed; its reservation returns to
// the subnet. Only an answer from EC2 proves the call did not take effect:
// after a transport failure or a cancelled context the intent stays open and
// is resolved later by describing EC2 (a create that did reach EC2 must not
// become a leak). If even the failure cannot be written, the same applies.
func (e *Engine) fail(ctx context.Context, in store.Intent, cause error) {
	if ctx.Err() != nil {
		return
	}
	if ec2client.Code(cause) == "" {
		e.log.Warn("EC2 call outcome unknown; intent left open to be resolved", "intent", in.ID, "kind", in.Kind, "err", cause)
		return
	}
	if err := e.st.FailIntent(ctx, in.ID, cause); err != nil {
		e.log.Warn("recording failed intent", "intent", in.ID, "kind", in.Kind, "err", err)
	}
}

// tags are the tags of every ENI allot creates.
func (e *Engine) tags(instance, token string, at time.Time) map[string]string {
	return map[string]string{
		ec2client.TagCluster:    e.cfg.Cluster,
		ec2client.TagInstanceID: instance,
		ec2client.TagCreatedAt:  at.UTC().Format(time.RFC3339),
		ec2client.TagOwner:      ec2client.OwnerValue,
		TagClientToken:          token,
	}
}

// apiRefused reports whether EC2 itself answered with an error (not a
// transport failure or our own throttling), so the call is known not to
// have taken effect.
func apiRefused(err error) bool {
	return ec2client.Code(err) != "" && !ec2client.IsThrottle(err)
}

// describeOne describes one ENI; found is false when EC2 says it does not
// exist.
func (e *Engine) describeOne(ctx context.Context, id string) (x ec2client.ENIInfo, found bool, err error) {
	infos, err := e.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: []string{id}})
	if ec2client.IsNotFound(err) {
		return x, false, nil
	}
	if err != nil {
		return x, false, fmt.Errorf("describe ENI %s: %w", id, err)
	}
	for _, i := range infos {
		if i.ID == id {
			return i, true, nil
		}
	}
	return x, false, nil
}

func eniRecord(x ec2client.ENIInfo, instance string, deviceIndex int, token string, at time.Time) store.ENI {
	return store.ENI{
		ID: x.ID, InstanceID: instance, SubnetID: x.SubnetID, MAC: x.MAC, DeviceIndex: deviceIndex,
		PrimaryIP: x.PrimaryIP, Addresses: x.Addresses, Prefixes: x.Prefixes,
		Status: store.ENICreated, ClientToken: token, CreatedAt: at,
	}
}

// podAddresses is how many pod addresses an ENI record holds.
func podAddresses(x store.ENI) int { return allotv1.PodAddresses(len(x.Addresses), len(x.Prefixes)) }
