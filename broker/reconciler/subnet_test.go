package reconciler_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/reconciler"
	"github.com/allotnet/allot/broker/store"
)

// TestWrongSubnetRecordCorrected: a well-formed but wrong subnet record
// (usable 100000, attached 0, while the /24 has 251 and an ENI of ours
// holds 3) is corrected within one pass, logged with both values, and the
// use by others is computed from the corrected figures, not explained away
// as 99,000-odd addresses of others. A second pass finds nothing.
func TestWrongSubnetRecordCorrected(t *testing.T) {
	e := newEnv(t, 1)
	ctx := ctxT(t)
	e.create(t, nil, 5) // someone else's ENI: 6 addresses
	x := e.create(t, ours(e.insts[0].ID), 2)
	e.record(t, x, e.insts[0].ID, 0) // ours: 3 addresses
	var logs bytes.Buffer
	e.rec = reconciler.New(reconciler.Config{Cluster: cluster, Store: e.st, EC2: e.ec2,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	key := e.st.Prefix() + "subnets/" + subnetID
	wrong := `{"v":1,"id":"` + subnetID + `","cidr":"10.0.0.0/24","az":"us-east-1a","vpc_id":"vpc-0123456789abcdef0",` +
		`"usable":100000,"headroom":0,"cap":0,"used_by_others":0,"attached":0,"reserved":0}`
	if _, err := e.st.Client().Put(ctx, key, wrong); err != nil {
		t.Fatal(err)
	}
	rep := e.pass(t)
	if a := action(rep, reconciler.KindSubnetRecord, subnetID); a != reconciler.ActionCorrected {
		t.Fatalf("subnet record finding %q, want corrected: %+v", a, rep.Findings)
	}
	sn, err := e.st.GetSubnet(ctx, subnetID)
	if err != nil {
		t.Fatal(err)
	}
	// The instance's primary address and the other ENI's six are others'.
	want := store.Subnet{Usable: 251, Attached: 3, UsedByOthers: 7}
	if sn.Usable != want.Usable || sn.Attached != want.Attached || sn.UsedByOthers != want.UsedByOthers || sn.Reserved != 0 {
		t.Errorf("after one pass: usable %d attached %d used by others %d reserved %d, want %d %d %d 0",
			sn.Usable, sn.Attached, sn.UsedByOthers, sn.Reserved, want.Usable, want.Attached, want.UsedByOthers)
	}
	for _, s := range []string{"usable_was=100000", "usable=251", "attached_was=0", "attached=3"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("the correction's log lacks %q:\n%s", s, logs.String())
		}
	}
	if rep := e.pass(t); rep.Count(reconciler.KindSubnetRecord)+rep.Count(reconciler.KindSubnetUse) != 0 {
		t.Errorf("still drifting after the correction: %+v", rep.Findings)
	}
	e.checkAccounts(t)
}

// TestSubnetRecordCheckedInDryRun: a dry run reports the wrong figures with
// both values and writes nothing.
func TestSubnetRecordCheckedInDryRun(t *testing.T) {
	e := newEnv(t, 1)
	ctx := ctxT(t)
	e.rec = reconciler.New(reconciler.Config{Cluster: cluster, Store: e.st, EC2: e.ec2, DryRun: true})
	key := e.st.Prefix() + "subnets/" + subnetID
	wrong := `{"v":1,"id":"` + subnetID + `","cidr":"10.0.0.0/24","az":"us-east-1a","vpc_id":"vpc-0123456789abcdef0","usable":100000}`
	if _, err := e.st.Client().Put(ctx, key, wrong); err != nil {
		t.Fatal(err)
	}
	rep := e.pass(t)
	var detail string
	for _, f := range rep.Findings {
		if f.Kind == reconciler.KindSubnetRecord {
			detail = f.Detail
		}
	}
	if !strings.Contains(detail, "usable 100000") || !strings.Contains(detail, "gives 251") {
		t.Errorf("detail %q does not give both values", detail)
	}
	resp, err := e.st.Client().Get(ctx, key)
	if err != nil || string(resp.Kvs[0].Value) != wrong {
		t.Errorf("a dry run wrote the record")
	}
}
