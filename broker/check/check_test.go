package check

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
)

type fakeRec struct{ rep reconciler.Report }

func (f fakeRec) Check(context.Context) (reconciler.Report, error) { return f.rep, nil }

type fakeStore struct {
	intents []store.Intent
	usage   map[string]store.Usage
	enis    []store.ENI
}

func (f fakeStore) ListOpenIntents(context.Context) ([]store.Intent, error)   { return f.intents, nil }
func (f fakeStore) ListUsage(context.Context) (map[string]store.Usage, error) { return f.usage, nil }
func (f fakeStore) ListENIs(context.Context) ([]store.ENI, error)             { return f.enis, nil }

// TestCheckClasses: the reconciler's findings pass through; an intent
// older than the threshold, an address the agent reports that no ENI
// record holds, and (in an old report) a recorded address the agent does
// not list are each reported once; what agrees is not.
func TestCheckClasses(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	st := fakeStore{
		intents: []store.Intent{
			{ID: "int-old", Kind: store.IntentCreate, InstanceID: "i-1", CreatedAt: now.Add(-20 * time.Minute)},
			{ID: "int-new", Kind: store.IntentAssign, InstanceID: "i-1", CreatedAt: now.Add(-time.Minute)},
		},
		enis: []store.ENI{
			{ID: "eni-1", InstanceID: "i-1", Addresses: []string{"10.0.0.5", "10.0.0.6"}, Status: store.ENIAttached},
			{ID: "eni-2", InstanceID: "i-2", Prefixes: []string{"10.0.1.16/28"}, Status: store.ENIAttached},
			{ID: "eni-3", InstanceID: "i-3", Addresses: []string{"10.0.2.5"}, Status: store.ENIAttached},
		},
		usage: map[string]store.Usage{
			// Old report: 10.0.0.6 is missing, 10.0.9.9 is unknown.
			"i-1": {Assigned: []string{"10.0.0.5", "10.0.9.9"}, UpdatedAt: now.Add(-time.Hour)},
			// Prefix mode: an address inside the recorded prefix is known.
			"i-2": {Assigned: []string{"10.0.1.20"}, UpdatedAt: now.Add(-time.Hour)},
			// Recent report: a missing address may be a delivery in flight.
			"i-3": {UpdatedAt: now.Add(-time.Minute)},
		},
	}
	rec := fakeRec{rep: reconciler.Report{ENIsInEC2: 3, ENIsInEtcd: 3, Findings: []reconciler.Finding{
		{Kind: reconciler.KindLeakedENI, ENIID: "eni-9", Detail: "leak"},
	}}}
	resp, err := New(rec, st, "broker-1", func() time.Time { return now }).Check(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range resp.GetFindings() {
		if _, dup := got[f.GetClass()]; dup {
			t.Errorf("class %s reported twice: %v", f.GetClass(), resp.GetFindings())
		}
		got[f.GetClass()] = f.GetEniId() + f.GetAddress() + f.GetInstanceId()
	}
	want := map[string]string{
		reconciler.KindLeakedENI: "eni-9",
		ClassStaleIntent:         "i-1",
		ClassUsageUnknownAddress: "10.0.9.9i-1",
		ClassUsageMissingAddress: "eni-110.0.0.6i-1",
	}
	if len(got) != len(want) {
		t.Errorf("findings %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	if resp.GetReplica() != "broker-1" || resp.GetEnisInEc2() != 3 {
		t.Errorf("response header: %v", resp)
	}
}
