package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

// newStore opens a Store for cluster "test" on a fresh embedded etcd.
func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(etcdembedtest.Start(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustSubnet(t *testing.T, s *Store, id string, usable int64) Subnet {
	t.Helper()
	sn, err := s.PutSubnet(ctxT(t), Subnet{ID: id, CIDR: "10.0.0.0/24", Usable: usable})
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

func mustNode(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, err := s.PutNode(ctxT(t), Node{InstanceID: id, InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

// checkLedger asserts the invariants that make the counters trustworthy:
// each subnet's Attached is the weight of its ENI records and its Reserved
// is what its open intents hold.
func checkLedger(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	subs, err := s.ListSubnets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enis, err := s.ListENIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	open, err := s.ListOpenIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range subs {
		var att, res int64
		for _, e := range enis {
			if e.SubnetID == sn.ID {
				att += e.Weight()
			}
		}
		for _, in := range open {
			if in.SubnetID == sn.ID {
				res += in.Reserved
			}
		}
		if sn.Attached != att || sn.Reserved != res {
			t.Errorf("subnet %s: attached %d reserved %d, records say %d and %d", sn.ID, sn.Attached, sn.Reserved, att, res)
		}
	}
}
