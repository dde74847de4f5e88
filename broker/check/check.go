// Package check is the broker's half of `allotctl check`: it compares EC2
// with etcd (the reconciler's comparison, without its repairs) and etcd
// with itself — intents left open, agents' usage reports that disagree with
// the ENI records — and reports each disagreement by class. It changes
// nothing, so any replica may run it at any time.
package check

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Classes the check adds to the reconciler's kinds (leaked-eni,
// missing-eni, untagged-eni, address-drift, attachment-drift, subnet-use,
// subnet-record, instance-gone).
const (
	// ClassStaleIntent is an intent open for longer than the threshold: its
	// reservation holds budget and its EC2 call may never have answered.
	ClassStaleIntent = "stale-intent"
	// ClassUsageUnknownAddress is an address a node's agent reports (in use
	// or free) that no ENI record of the node holds.
	ClassUsageUnknownAddress = "usage-unknown-address"
	// ClassUsageMissingAddress is an address an ENI record of the node
	// holds that the node's agent, in a report older than the threshold,
	// lists neither in use nor free: the usage is out of date, or the
	// agent lost the address.
	ClassUsageMissingAddress = "usage-missing-address"
)

// DefaultStaleAfter is the threshold when the request leaves it zero.
const DefaultStaleAfter = 10 * time.Minute

// Reconciler compares etcd with EC2 (reconciler.Reconciler's Check).
type Reconciler interface {
	Check(ctx context.Context) (reconciler.Report, error)
}

// Store is the part of etcd the check reads.
type Store interface {
	ListOpenIntents(ctx context.Context) ([]store.Intent, error)
	ListUsage(ctx context.Context) (map[string]store.Usage, error)
	ListENIs(ctx context.Context) ([]store.ENI, error)
}

var (
	_ Reconciler = (*reconciler.Reconciler)(nil)
	_ Store      = (*store.Store)(nil)
)

// Checker runs checks.
type Checker struct {
	rec     Reconciler
	st      Store
	replica string
	now     func() time.Time
}

// New returns a Checker; now nil is time.Now. replica names the broker
// replica in answers.
func New(rec Reconciler, st Store, replica string, now func() time.Time) *Checker {
	if now == nil {
		now = time.Now
	}
	return &Checker{rec: rec, st: st, replica: replica, now: now}
}

// Check compares once. staleAfter <= 0 means DefaultStaleAfter.
func (c *Checker) Check(ctx context.Context, staleAfter time.Duration) (*allotv1.CheckResponse, error) {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	rep, err := c.rec.Check(ctx)
	if err != nil {
		return nil, fmt.Errorf("compare etcd with EC2: %w", err)
	}
	out := &allotv1.CheckResponse{EnisInEc2: int32(rep.ENIsInEC2), EnisInEtcd: int32(rep.ENIsInEtcd), Replica: c.replica}
	for _, f := range rep.Findings {
		out.Findings = append(out.Findings, &allotv1.CheckFinding{
			Class: f.Kind, InstanceId: f.InstanceID, EniId: f.ENIID, SubnetId: f.SubnetID, Detail: f.Detail,
		})
	}
	intents, err := c.st.ListOpenIntents(ctx)
	if err != nil {
		return nil, fmt.Errorf("list open intents: %w", err)
	}
	now := c.now()
	out.Findings = append(out.Findings, staleIntents(intents, now, staleAfter)...)
	usage, errU := c.st.ListUsage(ctx)
	enis, errE := c.st.ListENIs(ctx)
	if err := errors.Join(errU, errE); err != nil {
		return nil, fmt.Errorf("read usage and ENI records: %w", err)
	}
	out.Findings = append(out.Findings, usageDrift(usage, enis, now, staleAfter)...)
	return out, nil
}

func staleIntents(intents []store.Intent, now time.Time, after time.Duration) []*allotv1.CheckFinding {
	var out []*allotv1.CheckFinding
	for _, in := range intents {
		if age := now.Sub(in.CreatedAt); age > after {
			out = append(out, &allotv1.CheckFinding{
				Class: ClassStaleIntent, InstanceId: in.InstanceID, EniId: in.ENIID, SubnetId: in.SubnetID,
				Detail: fmt.Sprintf("%s intent %s open for %s (reserves %d addresses)", in.Kind, in.ID, age.Round(time.Second), in.Reserved),
			})
		}
	}
	return out
}

// usageDrift compares each node's last usage report with its ENI records.
func usageDrift(usage map[string]store.Usage, enis []store.ENI, now time.Time, after time.Duration) []*allotv1.CheckFinding {
	// Every record counts as holding its addresses (one being detached
	// still does until EC2 deletes it); only attached ones are expected to
	// be in the agent's report.
	byNode := map[string][]store.ENI{}
	for _, e := range enis {
		byNode[e.InstanceID] = append(byNode[e.InstanceID], e)
	}
	ids := make([]string, 0, len(usage))
	for id := range usage {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []*allotv1.CheckFinding
	for _, id := range ids {
		u := usage[id]
		held := holdings(byNode[id])
		reported := map[string]bool{}
		for _, a := range append(append([]string(nil), u.Assigned...), u.Free...) {
			reported[a] = true
			if _, ok := held.owner(a); !ok {
				out = append(out, &allotv1.CheckFinding{Class: ClassUsageUnknownAddress, InstanceId: id, Address: a,
					Detail: "the agent reports " + a + " but no ENI record of the node holds it"})
			}
		}
		if now.Sub(u.UpdatedAt) <= after {
			continue // a recent report may not show a delivery in flight yet
		}
		for _, e := range byNode[id] {
			if e.Status != store.ENIAttached {
				continue
			}
			for _, a := range e.Addresses {
				if !reported[a] {
					out = append(out, &allotv1.CheckFinding{Class: ClassUsageMissingAddress, InstanceId: id, EniId: e.ID,
						SubnetId: e.SubnetID, Address: a,
						Detail: fmt.Sprintf("%s on %s is recorded for the node; its agent's report of %s lists it neither in use nor free",
							a, e.ID, u.UpdatedAt.UTC().Format(time.RFC3339))})
				}
			}
		}
	}
	return out
}

// holding is what a node's ENI records hold: single addresses and prefixes.
type holding struct {
	addrs    map[string]string
	prefixes map[netip.Prefix]string
}

func holdings(enis []store.ENI) holding {
	h := holding{addrs: map[string]string{}, prefixes: map[netip.Prefix]string{}}
	for _, e := range enis {
		for _, a := range e.Addresses {
			h.addrs[a] = e.ID
		}
		for _, p := range e.Prefixes {
			if pp, err := netip.ParsePrefix(p); err == nil {
				h.prefixes[pp] = e.ID
			}
		}
	}
	return h
}

// owner is the ENI holding a, as an address or within a prefix.
func (h holding) owner(a string) (string, bool) {
	if id, ok := h.addrs[a]; ok {
		return id, true
	}
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return "", false
	}
	for p, id := range h.prefixes {
		if p.Contains(ip) {
			return id, true
		}
	}
	return "", false
}
