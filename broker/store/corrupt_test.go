package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"strings"
	"testing"
)

func TestCorruptRecords(t *testing.T) {
	s := newBudgetStore(t, 100)
	ctx := ctxT(t)
	cli := s.Client()
	key := s.Prefix() + "subnets/subnet-1"
	cases := map[string]string{
		"not json":      `{"v":1,"id":"subnet-1","usable":`,
		"wrong version": `{"v":2,"id":"subnet-1","usable":110}`,
		"no version":    `{"id":"subnet-1","usable":110}`,
		"wrong id":      `{"v":1,"id":"subnet-2","usable":110}`,
		"wrong type":    `{"v":1,"id":"subnet-1","usable":"lots"}`,
	}
	for name, val := range cases {
		if _, err := cli.Put(ctx, key, val); err != nil {
			t.Fatal(err)
		}
		_, err := s.GetSubnet(ctx, "subnet-1")
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: GetSubnet error %v, want rpcerr.ErrCorrupt naming %s", name, err, key)
		}
		wantErr(t, err, rpcerr.ErrCorrupt)
		_, err = s.ListSubnets(ctx)
		wantErr(t, err, rpcerr.ErrCorrupt)
		// A write that depends on the record refuses too, and writes nothing.
		_, err = s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		wantErr(t, err, rpcerr.ErrCorrupt)
		_, err = s.SetSubnetBudget(ctx, "subnet-1", 0, 0)
		wantErr(t, err, rpcerr.ErrCorrupt)
		resp, err := cli.Get(ctx, key)
		if err != nil || string(resp.Kvs[0].Value) != val {
			t.Errorf("%s: corrupt value was overwritten", name)
		}
	}
	if open, err := s.ListOpenIntents(ctx); err != nil || len(open) != 0 {
		t.Fatalf("intents %+v, %v", open, err)
	}

	// A corrupt intent is not skipped by the listing a new leader relies on.
	if _, err := cli.Put(ctx, s.Prefix()+"intents/int-bad", "garbage"); err != nil {
		t.Fatal(err)
	}
	_, err := s.ListOpenIntents(ctx)
	wantErr(t, err, rpcerr.ErrCorrupt)
	if err == nil || !strings.Contains(err.Error(), "intents/int-bad") {
		t.Errorf("error %v does not name the key", err)
	}
	wantErr(t, s.CompleteModify(ctx, "int-bad"), rpcerr.ErrCorrupt)
}
