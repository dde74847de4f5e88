package store

import (
	"context"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
)

func TestStoreIDIsCreatedOnceAndShared(t *testing.T) {
	ctx := context.Background()
	cli := etcdembedtest.Start(t)
	a, err := Open(cli, "one")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Open(cli, "one")
	other, _ := Open(cli, "two")
	idA, err := a.StoreID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	idB, err := b.StoreID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := a.StoreID(ctx)
	if !strings.HasPrefix(idA, "st-") || idA != idB || idA != again {
		t.Fatalf("ids %q, %q, %q: want one st-… id for one cluster's state", idA, idB, again)
	}
	// Separate state (here: another cluster name; in the split brain the
	// guard catches, another etcd) gets its own id.
	if idO, _ := other.StoreID(ctx); idO == idA || idO == "" {
		t.Fatalf("cluster two got %q, cluster one %q: want different ids", idO, idA)
	}
}
