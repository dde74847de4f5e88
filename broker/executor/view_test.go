package executor

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/store"
)

// TestViewMatchesFullRead: the snapshot a round builds from the followed
// view equals the one a full read gives, after every kind of change the
// view applies (new records, updates, deletes, a record that does not
// decode, written before and after the follower's first read).
func TestViewMatchesFullRead(t *testing.T) {
	cli := etcdembedtest.Start(t)
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{st: newSerialStore(st), stats: newStats()}
	// The test's writes stand for the engine's own: the view must hold
	// them before a round plans.
	ctx, cancel := context.WithTimeout(store.WithWriteMark(context.Background(), &e.written), 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251})
	must(err)
	for _, id := range []string{"i-1", "i-2", "i-3"} {
		_, err = st.PutNode(ctx, store.Node{InstanceID: id, InstanceType: "m5.large", SubnetID: "subnet-1"})
		must(err)
	}
	must(st.PutDemand(ctx, store.Demand{InstanceID: "i-1", Pending: 3}))
	must(st.PutPrimaryENI(ctx, store.ENI{ID: "eni-1", InstanceID: "i-1", SubnetID: "subnet-1", PrimaryIP: "10.0.0.10", Addresses: []string{"10.0.0.11", "10.0.0.12"}}))
	_, err = cli.Put(ctx, st.Prefix()+"demand/i-3", `{"v":1,"instance_id":`)
	must(err)
	_, err = st.PutPodNetwork(ctx, store.PodNetwork{Name: "pods-a", SubnetIDs: []string{"subnet-1"}}, 0)
	must(err)

	e.view = &view{}
	e.updates = st.Follow(ctx).Updates()
	check := func(step string) {
		t.Helper()
		if !e.caughtUp(ctx) {
			t.Fatalf("%s: the view did not catch up with the last write", step)
		}
		fromView := e.view.snapshot(nil)
		full, err := e.load(ctx)
		must(err)
		if !sameSnapshot(fromView, full) {
			t.Fatalf("%s: view's snapshot\n%+v\nfull read's\n%+v", step, fromView, full)
		}
	}
	check("first read")

	_, err = st.PutNode(ctx, store.Node{InstanceID: "i-4", InstanceType: "m5.large", SubnetID: "subnet-1"})
	must(err)
	must(st.PutDemand(ctx, store.Demand{InstanceID: "i-1", Pending: 1, WarmShortfall: 2}))
	must(st.PutDemand(ctx, store.Demand{InstanceID: "i-4", WarmShortfall: 9}))
	_, err = st.PutUsage(ctx, store.Usage{InstanceID: "i-1", Seq: 1, Assigned: []string{"10.0.0.11"}, Free: []string{"10.0.0.12"}})
	must(err)
	_, err = st.ProposeRelease(ctx, store.Release{InstanceID: "i-1", ENIID: "eni-1", Addresses: []string{"10.0.0.12"}})
	must(err)
	_, err = cli.Put(ctx, st.Prefix()+"nodes/i-2", `{"v":1,"instance_id":`)
	must(err)
	_, err = cli.Put(ctx, st.Prefix()+"demand/i-3", `{"v":1,"instance_id":"i-3","pending":2}`)
	must(err)
	_, err = st.PutPodNetwork(ctx, store.PodNetwork{Name: "pods-b", SubnetIDs: []string{"subnet-1"}}, 0)
	must(err)
	_, err = cli.Put(ctx, st.Prefix()+"podnetworks/pods-c", `{"v":1,"name":`)
	must(err)
	_, err = st.SetSubnetBudget(ctx, "subnet-1", 10, 0)
	must(err)
	check("after changes")

	must(st.DeleteNode(ctx, "i-4"))
	_, err = cli.Delete(ctx, st.Prefix()+"nodes/i-2")
	must(err)
	_, err = cli.Delete(ctx, st.Prefix()+"podnetworks/pods-a")
	must(err)
	must(st.PutDemand(ctx, store.Demand{InstanceID: "i-1"}))
	check("after deletes")
	if e.stats.FullReads != 0 {
		t.Errorf("%d full reads, want none", e.stats.FullReads)
	}
}

// listCounter counts the full reads of the open intents.
type listCounter struct {
	Store
	lists atomic.Int32
}

func (c *listCounter) ListOpenIntents(ctx context.Context) ([]store.Intent, error) {
	c.lists.Add(1)
	return c.Store.ListOpenIntents(ctx)
}

// TestViewFollowsIntents: an intent another writer begins (the reconciler,
// a previous leader) reaches the round's snapshot through the view, and
// leaves it when it ends, without a full read of the intents.
func TestViewFollowsIntents(t *testing.T) {
	cli := etcdembedtest.Start(t)
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	lc := &listCounter{Store: st}
	e := &Engine{st: newSerialStore(lc), stats: newStats()}
	ctx, cancel := context.WithTimeout(store.WithWriteMark(context.Background(), &e.written), 30*time.Second)
	defer cancel()
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	before, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.view, e.updates = &view{}, e.st.Follow(ctx).Updates()
	openOf := func(step string) []string {
		t.Helper()
		snap, err := e.current(ctx, newRoundPhases(false))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		var ids []string
		for _, in := range snap.open["i-1"] {
			ids = append(ids, in.ID)
		}
		return ids
	}
	if got := openOf("first read"); !slices.Equal(got, []string{before.ID}) {
		t.Fatalf("first read: open intents %v, want [%s]", got, before.ID)
	}
	after, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.FailIntent(ctx, before.ID, errors.New("refused")); err != nil {
		t.Fatal(err)
	}
	if got := openOf("after changes"); !slices.Equal(got, []string{after.ID}) {
		t.Fatalf("after changes: open intents %v, want [%s]", got, after.ID)
	}
	if n := lc.lists.Load(); n != 0 || e.stats.FullReads != 0 {
		t.Errorf("%d full reads of the intents, %d of everything; want none", n, e.stats.FullReads)
	}
}

// TestViewSnapshotIsolated: a snapshot holds the view's maps and lists
// instead of copies, so a change the view applies after it must not reach
// it: every kind of change is applied after a snapshot, which must still
// equal one built from the records it was taken at; and the next
// snapshot equals one built afresh from the changed records.
func TestViewSnapshotIsolated(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := func() *store.Records {
		return &store.Records{
			Rev:     10,
			Subnets: []store.Subnet{{ID: "subnet-1", Usable: 251}},
			Nodes:   []store.Node{{InstanceID: "i-1"}, {InstanceID: "i-2"}},
			Demands: []store.Demand{{InstanceID: "i-1", Pending: 3}},
			Usage:   []store.Usage{{InstanceID: "i-1", Seq: 1}},
			ENIs: []store.ENI{
				{ID: "eni-p1", InstanceID: "i-1", Primary: true},
				{ID: "eni-b", InstanceID: "i-1", DeviceIndex: 2},
				{ID: "eni-a", InstanceID: "i-1", DeviceIndex: 1},
				{ID: "eni-p2", InstanceID: "i-2", Primary: true},
			},
			Releases: []store.Release{
				{ID: "rel-2", InstanceID: "i-1", CreatedAt: t0.Add(time.Second)},
				{ID: "rel-1", InstanceID: "i-1", CreatedAt: t0},
			},
			Intents: []store.Intent{{ID: "int-1", InstanceID: "i-1", ENIID: "eni-a", State: store.IntentOpen}},
		}
	}
	fresh := func(r *store.Records) *snapshot {
		v := &view{}
		v.reset(r)
		return v.snapshot(v.openIntents())
	}
	v := &view{}
	v.reset(recs())
	first := v.snapshot(v.openIntents())
	if !sameSnapshot(first, fresh(recs())) {
		t.Fatalf("first snapshot\n%+v\nwant\n%+v", first, fresh(recs()))
	}

	changes := []store.Change{
		{Kind: store.RecordNode, ID: "i-3", Record: store.Node{InstanceID: "i-3"}},
		{Kind: store.RecordDemand, ID: "i-1", Record: store.Demand{InstanceID: "i-1", Pending: 1}},
		{Kind: store.RecordUsage, ID: "i-2", Record: store.Usage{InstanceID: "i-2", Seq: 4}},
		{Kind: store.RecordSubnet, ID: "subnet-1", Record: store.Subnet{ID: "subnet-1", Usable: 100}},
		{Kind: store.RecordENI, ID: "eni-b", Record: store.ENI{ID: "eni-b", InstanceID: "i-1", DeviceIndex: 0}},
		{Kind: store.RecordENI, ID: "eni-a", Deleted: true},
		{Kind: store.RecordENI, ID: "eni-c", Record: store.ENI{ID: "eni-c", InstanceID: "i-3", DeviceIndex: 1}},
		{Kind: store.RecordENI, ID: "eni-p2", Deleted: true},
		{Kind: store.RecordRelease, ID: "rel-1", Deleted: true},
		{Kind: store.RecordRelease, ID: "rel-3", Record: store.Release{ID: "rel-3", InstanceID: "i-2", CreatedAt: t0}},
		{Kind: store.RecordIntent, ID: "int-1", Record: store.Intent{ID: "int-1", InstanceID: "i-1", State: store.IntentDone}},
		{Kind: store.RecordIntent, ID: "int-2", Record: store.Intent{ID: "int-2", InstanceID: "i-3", State: store.IntentOpen}},
	}
	v.update(store.FollowUpdate{Changes: changes, Rev: 11})
	if !sameSnapshot(first, fresh(recs())) {
		t.Fatalf("a later change reached the first snapshot:\n%+v", first)
	}

	after := recs()
	after.Rev = 11
	after.Nodes = append(after.Nodes, store.Node{InstanceID: "i-3"})
	after.Demands = []store.Demand{{InstanceID: "i-1", Pending: 1}}
	after.Usage = append(after.Usage, store.Usage{InstanceID: "i-2", Seq: 4})
	after.Subnets = []store.Subnet{{ID: "subnet-1", Usable: 100}}
	after.ENIs = []store.ENI{{ID: "eni-p1", InstanceID: "i-1", Primary: true}, {ID: "eni-b", InstanceID: "i-1"}, {ID: "eni-c", InstanceID: "i-3", DeviceIndex: 1}}
	after.Releases = []store.Release{{ID: "rel-2", InstanceID: "i-1", CreatedAt: t0.Add(time.Second)}, {ID: "rel-3", InstanceID: "i-2", CreatedAt: t0}}
	after.Intents = []store.Intent{{ID: "int-2", InstanceID: "i-3", State: store.IntentOpen}}
	if got := v.snapshot(v.openIntents()); !sameSnapshot(got, fresh(after)) {
		t.Fatalf("snapshot after the changes\n%+v\nwant\n%+v", got, fresh(after))
	}
}

// pruneCounter counts the reads of every intent a prune can make.
type pruneCounter struct {
	Store
	full atomic.Int32
}

func (c *pruneCounter) PruneIntents(ctx context.Context, olderThan time.Time) (int, error) {
	c.full.Add(1)
	return c.Store.PruneIntents(ctx, olderThan)
}

func (c *pruneCounter) ListIntents(ctx context.Context) ([]store.Intent, error) {
	c.full.Add(1)
	return c.Store.ListIntents(ctx)
}

// TestPruneFromView: while the engine follows etcd, a prune deletes the
// finished intents its view knows (from the first read and from changes)
// that finished before the retention, without reading every intent, and
// leaves open and younger ones.
func TestPruneFromView(t *testing.T) {
	cli := etcdembedtest.Start(t)
	st, err := store.Open(cli, "test")
	if err != nil {
		t.Fatal(err)
	}
	pc := &pruneCounter{Store: st}
	e := &Engine{st: newSerialStore(pc), stats: newStats(), log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithTimeout(store.WithWriteMark(context.Background(), &e.written), 30*time.Second)
	defer cancel()
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-1", CIDR: "10.0.0.0/24", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: "i-1", InstanceType: "m5.large", SubnetID: "subnet-1"}); err != nil {
		t.Fatal(err)
	}
	finish := func() store.Intent {
		t.Helper()
		in, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.FailIntent(ctx, in.ID, errors.New("refused")); err != nil {
			t.Fatal(err)
		}
		if in, err = st.GetIntent(ctx, in.ID); err != nil {
			t.Fatal(err)
		}
		return in
	}
	early := finish() // in the view's first read
	open, err := st.BeginIntent(ctx, store.Intent{Kind: store.IntentCreate, InstanceID: "i-1", SubnetID: "subnet-1", Reserved: 1})
	if err != nil {
		t.Fatal(err)
	}
	e.view, e.updates = &view{}, e.st.Follow(ctx).Updates()
	later := finish() // a change the view applies
	young := finish()
	if !e.caughtUp(ctx) {
		t.Fatal("the view did not catch up")
	}
	if !e.prune(ctx, newRunState(func(error) {}), later.FinishedAt.Add(retain+time.Nanosecond)) {
		t.Fatal("no prune started")
	}
	e.publishers.Wait()
	left, err := st.ListIntents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, in := range left {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	want := []string{open.ID, young.ID}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Errorf("after the prune etcd keeps intents %v, want the open %s and the younger %s (%s and %s pruned)",
			ids, open.ID, young.ID, early.ID, later.ID)
	}
	if n := pc.full.Load(); n != 0 {
		t.Errorf("the prune read every intent %d times, want none", n)
	}
}

// sameSnapshot reports whether a and b hold the same records: their
// shards maps compared by what they hold, not by how it is split.
func sameSnapshot(a, b *snapshot) bool {
	return reflect.DeepEqual(plain(a), plain(b))
}

type plainSnapshot struct {
	rest    snapshot
	demands map[string]store.Demand
	usage   map[string]store.Usage
	enis    map[string]store.ENI
	byNode  map[string][]store.ENI
}

func plain(s *snapshot) plainSnapshot {
	rest := *s
	rest.demands, rest.usage, rest.enis, rest.byNode = nil, nil, nil, nil
	return plainSnapshot{rest, maps.Collect(s.demands.all()), maps.Collect(s.usage.all()), maps.Collect(s.enis.all()), maps.Collect(s.byNode.all())}
}

// TestViewCountsUnsettledENIs: the view keeps, by instance, how many ENIs
// upkeep has work for (created and not attached, detached and not
// deleted; never a primary), as a full read counts them, through every
// kind of change; a snapshot keeps the count it was made with; and
// upkeepNodes names those nodes and the nodes with releases, sound ones
// only, in order.
func TestViewCountsUnsettledENIs(t *testing.T) {
	recs := &store.Records{
		Rev:   10,
		Nodes: []store.Node{{InstanceID: "i-1"}, {InstanceID: "i-2"}, {InstanceID: "i-3"}},
		ENIs: []store.ENI{
			{ID: "eni-p1", InstanceID: "i-1", Primary: true, Status: store.ENIAttached},
			{ID: "eni-a", InstanceID: "i-1", DeviceIndex: 1, Status: store.ENICreated},
			{ID: "eni-b", InstanceID: "i-2", DeviceIndex: 1, Status: store.ENIAttached},
			{ID: "eni-p3", InstanceID: "i-3", Primary: true, Status: store.ENIDetached},
		},
		Releases: []store.Release{{ID: "rel-1", InstanceID: "i-3"}, {ID: "rel-9", InstanceID: "i-9"}},
	}
	v := &view{}
	v.reset(recs)
	first := v.snapshot(nil)
	if want := map[string]int{"i-1": 1}; !maps.Equal(first.unsettled, want) {
		t.Fatalf("after the full read: %v, want %v", first.unsettled, want)
	}
	if got, want := upkeepNodes(first), []string{"i-1", "i-3"}; !slices.Equal(got, want) {
		t.Errorf("upkeep walks %v, want %v (i-9 has no node record)", got, want)
	}
	eni := func(id, inst string, dev int, status string) store.Change {
		return store.Change{Kind: store.RecordENI, ID: id, Record: store.ENI{ID: id, InstanceID: inst, DeviceIndex: dev, Status: status}}
	}
	v.update(store.FollowUpdate{Rev: 11, Changes: []store.Change{
		eni("eni-a", "i-1", 1, store.ENIAttached), // attached: settled
		eni("eni-b", "i-2", 1, store.ENIDetached), // detached: to delete
		eni("eni-c", "i-2", 2, store.ENICreated),  // created: to attach
		eni("eni-d", "i-3", 1, store.ENICreated),
	}})
	second := v.snapshot(nil)
	if want := map[string]int{"i-2": 2, "i-3": 1}; !maps.Equal(second.unsettled, want) {
		t.Errorf("after the changes: %v, want %v", second.unsettled, want)
	}
	if want := map[string]int{"i-1": 1}; !maps.Equal(first.unsettled, want) {
		t.Errorf("the first snapshot's count moved to %v, want %v", first.unsettled, want)
	}
	v.update(store.FollowUpdate{Rev: 12, Changes: []store.Change{
		{Kind: store.RecordENI, ID: "eni-b", Deleted: true},
		{Kind: store.RecordENI, ID: "eni-d", Deleted: true},
		eni("eni-c", "i-3", 2, store.ENICreated), // moved to another instance
	}})
	third := v.snapshot(nil)
	if want := map[string]int{"i-3": 1}; !maps.Equal(third.unsettled, want) {
		t.Errorf("after the deletes and the move: %v, want %v", third.unsettled, want)
	}
	full := &view{}
	full.reset(&store.Records{Rev: 12, Nodes: recs.Nodes, ENIs: []store.ENI{
		{ID: "eni-p1", InstanceID: "i-1", Primary: true, Status: store.ENIAttached},
		{ID: "eni-a", InstanceID: "i-1", DeviceIndex: 1, Status: store.ENIAttached},
		{ID: "eni-c", InstanceID: "i-3", DeviceIndex: 2, Status: store.ENICreated},
		{ID: "eni-p3", InstanceID: "i-3", Primary: true, Status: store.ENIDetached},
	}})
	if got := full.snapshot(nil).unsettled; !maps.Equal(got, third.unsettled) {
		t.Errorf("a full read counts %v, the followed view %v", got, third.unsettled)
	}
}
