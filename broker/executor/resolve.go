package executor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// resolveAll resolves, before anything is planned, every intent a previous
// leader (or this one before a restart) left open: each is completed or
// failed according to what EC2 shows.
func (e *Engine) resolveAll(ctx context.Context, rs *runState) error {
	now := e.cfg.Clock.Now()
	open, err := e.st.ListOpenIntents(ctx)
	if err != nil {
		return fmt.Errorf("list open intents: %w", err)
	}
	byNode := map[string][]store.Intent{}
	for _, in := range open {
		if e.resolvable(rs, in, now) {
			byNode[in.InstanceID] = append(byNode[in.InstanceID], in)
		}
	}
	if len(byNode) > 0 {
		e.log.Info("resolving open intents", "intents", len(open), "nodes", len(byNode))
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, workers)
	)
	for _, ins := range byNode {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := e.resolveIntents(ctx, rs, ins); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// seedLedger counts, before anything is planned, the addresses earlier
// leaders delivered: a finished create or assign whose ENI is still
// recorded. Each counts against its node's demand only if the demand is
// older than the intent (the agent stated it without knowing them), so a
// new leader does not plan again what the previous one already did.
func (e *Engine) seedLedger(ctx context.Context, rs *runState) error {
	all, err := e.st.ListIntents(ctx)
	if err != nil {
		return fmt.Errorf("list intents: %w", err)
	}
	enis, err := e.st.ListENIs(ctx)
	if err != nil {
		return fmt.Errorf("list enis: %w", err)
	}
	recorded := map[string]bool{}
	for _, x := range enis {
		recorded[x.ID] = true
	}
	for _, in := range all {
		if in.State != store.IntentDone || !recorded[in.ENIID] ||
			(in.Kind != store.IntentCreate && in.Kind != store.IntentAssign) {
			continue
		}
		n := in.Count
		if in.Prefix {
			n *= allotv1.PrefixSize
		}
		key := in.ID
		if in.Kind == store.IntentCreate {
			key = in.ENIID
		}
		e.remember(rs, in.InstanceID, key, n, in.CreatedAt)
	}
	return nil
}

// errClosed means an intent was closed since it was listed: nothing to do.
var errClosed = errors.New("intent no longer open")

// resolvable says whether an open intent may be resolved now: not one a
// running task holds, and not one the reconciler wrote moments ago and is
// still carrying out.
func (e *Engine) resolvable(rs *runState, in store.Intent, now time.Time) bool {
	if rs.owned(in.ID) {
		return false
	}
	if strings.HasPrefix(in.ID, ReconcilerIntentPrefix) && now.Sub(in.CreatedAt) < staleIntent {
		return false
	}
	return true
}

// resolveIntents resolves one node's open intents oldest first (a create
// before the attach that follows it).
func (e *Engine) resolveIntents(ctx context.Context, rs *runState, ins []store.Intent) error {
	sort.Slice(ins, func(i, j int) bool { return ins[i].CreatedAt.Before(ins[j].CreatedAt) })
	var errs []error
	for _, in := range ins {
		err := e.resolve(ctx, rs, in)
		if errors.Is(err, errClosed) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("resolve %s intent %s for %s: %w", in.Kind, in.ID, in.InstanceID, err))
			continue
		}
		e.count(func(s *Stats) { s.Resolved++ })
	}
	return errors.Join(errs...)
}

func (e *Engine) resolve(ctx context.Context, rs *runState, in store.Intent) error {
	rs.own(in.ID, true)
	defer rs.own(in.ID, false)
	// The list it came from may be stale: act only on an intent still open.
	cur, err := e.st.GetIntent(ctx, in.ID)
	switch {
	case errors.Is(err, rpcerr.ErrNotFound):
		return errClosed
	case err != nil:
		return fmt.Errorf("read intent: %w", err)
	case cur.State != store.IntentOpen:
		return errClosed
	}
	in = cur
	e.log.Info("resolving open intent", "intent", in.ID, "kind", in.Kind, "instance", in.InstanceID, "eni", in.ENIID)
	switch in.Kind {
	case store.IntentCreate:
		return e.resolveCreate(ctx, rs, in)
	case store.IntentAttach, store.IntentModify:
		return e.resolveAttach(ctx, rs, in)
	case store.IntentAssign:
		return e.resolveAssign(ctx, rs, in)
	case store.IntentUnassign:
		return e.resolveUnassign(ctx, in)
	case store.IntentDetach:
		return e.resolveDetach(ctx, in)
	case store.IntentDelete:
		return e.resolveDelete(ctx, in)
	}
	return e.st.FailIntent(ctx, in.ID, fmt.Errorf("unknown intent kind %q", in.Kind))
}

// resolveCreate looks for the ENI by its client-token tag. Found: the
// create happened; it is recorded and the round goes on to attach it. Not
// found, and the intent is recent: Describe may lag a create (EC2 is
// eventually consistent), so the very same request is sent again, which EC2
// answers with the ENI the first one made, or makes it now; either way one
// ENI. Not found and old: the create did not happen; the reservation is
// returned (an ENI that appears later is the reconciler's leak to collect).
func (e *Engine) resolveCreate(ctx context.Context, rs *runState, in store.Intent) error {
	token := in.ClientToken
	if token == "" {
		token = in.ID
	}
	infos, err := e.ec2.DescribeENIs(ctx, ec2client.DescribeENIsInput{
		Tags: map[string]string{ec2client.TagCluster: e.cfg.Cluster, TagClientToken: token},
	})
	if err != nil {
		return fmt.Errorf("describe ENI with client token %s: %w", token, err)
	}
	if len(infos) > 1 {
		e.log.Error("several ENIs carry one client token; recording the first, the reconciler reports the rest",
			"token", token, "enis", len(infos))
	}
	var x ec2client.ENIInfo
	switch {
	case len(infos) > 0:
		x = infos[0]
	case e.cfg.Clock.Now().Sub(in.CreatedAt) > replayCreateWithin:
		return e.st.FailIntent(ctx, in.ID, errors.New("no ENI carries the intent's client token: the create did not happen"))
	default:
		n, err := e.st.GetNode(ctx, in.InstanceID)
		if err != nil && !errors.Is(err, rpcerr.ErrNotFound) {
			return fmt.Errorf("read node %s: %w", in.InstanceID, err)
		}
		x, err = e.ec2.CreateENI(ctx, e.createInput(in, n.SecurityGroups))
		if err != nil {
			if apiRefused(err) {
				return e.st.FailIntent(ctx, in.ID, err)
			}
			return fmt.Errorf("repeat create with client token %s: %w", token, err)
		}
		e.log.Info("create intent resolved by repeating its ClientToken", "intent", in.ID, "eni", x.ID)
	}
	rec := eniRecord(x, in.InstanceID, in.DeviceIndex, token, in.CreatedAt)
	if err := e.st.CompleteCreate(ctx, in.ID, rec); err != nil {
		return err
	}
	e.deliver(rs, in.InstanceID, rec.ID, podAddresses(rec), in.CreatedAt)
	return nil
}

// resolveAttach completes an attach (or DeleteOnTermination) intent if EC2
// shows the ENI attached to the node; otherwise it fails it and the round
// attaches the still-created ENI again.
func (e *Engine) resolveAttach(ctx context.Context, rs *runState, in store.Intent) error {
	x, found, err := e.describeOne(ctx, in.ENIID)
	if err != nil {
		return err
	}
	if !found {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s does not exist", in.ENIID))
	}
	if x.AttachmentID == "" || x.InstanceID != in.InstanceID {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s is not attached to %s", in.ENIID, in.InstanceID))
	}
	if in.Kind == store.IntentAttach {
		if err := e.st.CompleteAttach(ctx, in.ID, in.ENIID, x.DeviceIndex); err != nil {
			return err
		}
		if x.DeleteOnTermination {
			return nil
		}
		return e.modify(ctx, rs, store.ENI{ID: x.ID, InstanceID: in.InstanceID, SubnetID: x.SubnetID}, x.AttachmentID, chained{})
	}
	if !x.DeleteOnTermination {
		if err := e.ec2.SetDeleteOnTermination(ctx, x.ID, x.AttachmentID, true); err != nil {
			return e.st.FailIntent(ctx, in.ID, err)
		}
	}
	return e.st.CompleteModify(ctx, in.ID)
}

// resolveAssign records whatever addresses the ENI has in EC2 that etcd
// lacks: those are what the interrupted assign added.
func (e *Engine) resolveAssign(ctx context.Context, rs *runState, in store.Intent) error {
	x, found, err := e.describeOne(ctx, in.ENIID)
	if err != nil {
		return err
	}
	if !found {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s does not exist", in.ENIID))
	}
	rec, err := e.st.GetENI(ctx, in.ENIID)
	if err != nil {
		return fmt.Errorf("read ENI record %s: %w", in.ENIID, err)
	}
	addrs := minus(x.Addresses, rec.Addresses)
	prefixes := minus(x.Prefixes, rec.Prefixes)
	if len(addrs)+len(prefixes) == 0 {
		return e.st.FailIntent(ctx, in.ID, errors.New("EC2 shows no address that etcd lacks: the assign did not happen"))
	}
	if err := e.st.CompleteAssign(ctx, in.ID, in.ENIID, addrs, prefixes); err != nil {
		return err
	}
	e.deliver(rs, in.InstanceID, in.ID, allotv1.PodAddresses(len(addrs), len(prefixes)), in.CreatedAt)
	return nil
}

// resolveUnassign records the intent's addresses that EC2 no longer shows
// on the ENI, and finishes the release when all are gone.
func (e *Engine) resolveUnassign(ctx context.Context, in store.Intent) error {
	x, found, err := e.describeOne(ctx, in.ENIID)
	if err != nil {
		return err
	}
	if !found {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s does not exist", in.ENIID))
	}
	gone := minus(in.Addresses, x.Addresses)
	goneP := minus(in.Prefixes, x.Prefixes)
	if len(gone)+len(goneP) == 0 {
		return e.st.FailIntent(ctx, in.ID, errors.New("EC2 still shows every address: the unassign did not happen"))
	}
	if err := e.st.CompleteUnassign(ctx, in.ID, in.ENIID, gone, goneP); err != nil {
		return err
	}
	if in.ReleaseID != "" && len(gone) == len(in.Addresses) && len(goneP) == len(in.Prefixes) {
		if err := e.st.FinishRelease(ctx, in.ReleaseID); err != nil && !errors.Is(err, rpcerr.ErrNotFound) {
			return fmt.Errorf("finish release %s: %w", in.ReleaseID, err)
		}
	}
	return nil
}

// resolveDetach completes a detach if EC2 shows the ENI no longer attached
// (or gone); the round then deletes it.
func (e *Engine) resolveDetach(ctx context.Context, in store.Intent) error {
	x, found, err := e.describeOne(ctx, in.ENIID)
	if err != nil {
		return err
	}
	if found && x.AttachmentID != "" && x.Status == "in-use" {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s is still attached", in.ENIID))
	}
	return e.st.CompleteDetach(ctx, in.ID, in.ENIID)
}

// resolveDelete completes a delete if EC2 says the ENI does not exist.
func (e *Engine) resolveDelete(ctx context.Context, in store.Intent) error {
	_, found, err := e.describeOne(ctx, in.ENIID)
	if err != nil {
		return err
	}
	if found {
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s still exists", in.ENIID))
	}
	if in.ReleaseID != "" {
		// An ENI given up whole: its record and its release close together.
		return e.st.CompleteGiveUp(ctx, in.ID, in.ENIID)
	}
	err = e.st.CompleteDelete(ctx, in.ID, in.ENIID)
	if errors.Is(err, rpcerr.ErrNotFound) {
		// A leaked ENI the reconciler collected never had a record.
		return e.st.FailIntent(ctx, in.ID, fmt.Errorf("ENI %s deleted; it had no record", in.ENIID))
	}
	return err
}

// minus returns the elements of a not in b.
func minus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
