package store

import (
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"testing"
)

func TestOpenValidates(t *testing.T) {
	if _, err := Open(nil, "x"); err == nil {
		t.Error("Open(nil) succeeded")
	}
	s := newStore(t)
	for _, c := range []string{"", "a/b", "a b"} {
		if _, err := Open(s.Client(), c); err == nil {
			t.Errorf("Open cluster %q succeeded", c)
		}
	}
	if got, want := s.Prefix(), "/allot/v1/test/"; got != want {
		t.Errorf("Prefix = %q, want %q", got, want)
	}
	if got, want := s.ElectionPrefix(), "/allot/v1/test/election"; got != want {
		t.Errorf("ElectionPrefix = %q, want %q", got, want)
	}
}

func TestSubnetPutKeepsBudgetAndCounters(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	sn, err := s.PutSubnet(ctx, Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251, Headroom: 10, Attached: 99, Reserved: 7})
	if err != nil {
		t.Fatal(err)
	}
	if sn.Attached != 0 || sn.Reserved != 0 || sn.Headroom != 10 || sn.V != SchemaVersion || sn.Rev == 0 {
		t.Fatalf("created %+v: counters must start at 0, budget kept, V and Rev set", sn)
	}
	mustNode(t, s, "i-1")
	if _, err := s.BeginIntent(ctx, Intent{Kind: IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetSubnetBudget(ctx, "subnet-1", 20, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetUsedByOthers(ctx, "subnet-1", 3); err != nil {
		t.Fatal(err)
	}
	// An update (from DescribeSubnets) changes only the EC2-owned fields.
	sn, err = s.PutSubnet(ctx, Subnet{ID: "subnet-1", CIDR: "10.0.0.0/23", AvailabilityZone: "az-a", VPCID: "vpc-1", Usable: 507})
	if err != nil {
		t.Fatal(err)
	}
	want := Subnet{V: 1, ID: "subnet-1", CIDR: "10.0.0.0/23", AvailabilityZone: "az-a", VPCID: "vpc-1",
		Usable: 507, Headroom: 20, Cap: 100, UsedByOthers: 3, Reserved: 5, Rev: sn.Rev}
	if sn != want {
		t.Fatalf("after update got %+v, want %+v", sn, want)
	}
	got, err := s.GetSubnet(ctx, "subnet-1")
	if err != nil || got != want {
		t.Fatalf("GetSubnet = %+v, %v; want %+v", got, err, want)
	}
	if got.Limit() != 100 || got.Available() != 95 {
		t.Errorf("limit %d available %d, want 100 and 95", got.Limit(), got.Available())
	}
}

func TestSubnetErrorsAndList(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	_, err := s.GetSubnet(ctx, "subnet-x")
	wantErr(t, err, rpcerr.ErrNotFound)
	_, err = s.SetSubnetBudget(ctx, "subnet-x", 1, 1)
	wantErr(t, err, rpcerr.ErrNotFound)
	_, err = s.SetUsedByOthers(ctx, "subnet-x", 1)
	wantErr(t, err, rpcerr.ErrNotFound)
	_, err = s.PutSubnet(ctx, Subnet{ID: ""})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.PutSubnet(ctx, Subnet{ID: "a/b"})
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.PutSubnet(ctx, Subnet{ID: "s", Usable: -1})
	wantErr(t, err, rpcerr.ErrInvalid)
	mustSubnet(t, s, "subnet-b", 10)
	mustSubnet(t, s, "subnet-a", 10)
	_, err = s.SetSubnetBudget(ctx, "subnet-a", -1, 0)
	wantErr(t, err, rpcerr.ErrInvalid)
	_, err = s.SetUsedByOthers(ctx, "subnet-a", -1)
	wantErr(t, err, rpcerr.ErrInvalid)
	list, err := s.ListSubnets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "subnet-a" || list[1].ID != "subnet-b" {
		t.Fatalf("ListSubnets = %+v, want subnet-a, subnet-b", list)
	}
}

func TestWritesCounted(t *testing.T) {
	s := newStore(t)
	ctx := ctxT(t)
	mustSubnet(t, s, "subnet-1", 10)
	if _, err := s.SetSubnetBudget(ctx, "subnet-1", 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSubnet(ctx, "subnet-1"); err != nil {
		t.Fatal(err)
	}
	w := s.Writes()
	if w["PutSubnet"] != 1 || w["SetSubnetBudget"] != 1 || len(w) != 2 {
		t.Fatalf("Writes = %v, want one PutSubnet and one SetSubnetBudget, no reads", w)
	}
	w["PutSubnet"] = 100 // a copy
	if s.Writes()["PutSubnet"] != 1 {
		t.Error("Writes returned the internal map")
	}
}
