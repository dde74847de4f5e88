package store

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestDecodedIDsShareTheirBytes checks that records decoded apart that
// name the same instance, ENI or subnet hold one copy of each ID, so the
// engine's maps compare them by pointer (intern).
func TestDecodedIDsShareTheirBytes(t *testing.T) {
	const inst, eni, subnet = "i-0123456789abcdef0", "eni-0123456789abcdef0", "subnet-0123456789abcdef0"
	enc := func(r record) []byte {
		r.setSchema()
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var n Node
	if err := decode("n", enc(&Node{InstanceID: inst, SubnetID: subnet, PrimaryENIID: eni}), 1, inst, &n); err != nil {
		t.Fatal(err)
	}
	// A collection between two decodes must not part them: the node
	// record holds the shared copy.
	runtime.GC()
	runtime.GC()
	var d Demand
	if err := decode("d", enc(&Demand{InstanceID: inst}), 2, inst, &d); err != nil {
		t.Fatal(err)
	}
	var x ENI
	if err := decode("e", enc(&ENI{ID: eni, InstanceID: inst, SubnetID: subnet, Status: ENIAttached}), 3, eni, &x); err != nil {
		t.Fatal(err)
	}
	var in Intent
	if err := decode("i", enc(&Intent{ID: "intent-1", InstanceID: inst, ENIID: eni, SubnetID: subnet, State: IntentOpen}), 4, "intent-1", &in); err != nil {
		t.Fatal(err)
	}
	same := func(what string, a, b string) {
		t.Helper()
		if a != b || unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("%s: %q at %p and %q at %p, want one shared copy", what, a, unsafe.StringData(a), b, unsafe.StringData(b))
		}
	}
	same("node and demand instance", n.InstanceID, d.InstanceID)
	same("node and ENI instance", n.InstanceID, x.InstanceID)
	same("node and intent instance", n.InstanceID, in.InstanceID)
	same("node's primary and ENI id", n.PrimaryENIID, x.ID)
	same("intent's and ENI's id", in.ENIID, x.ID)
	same("node's and ENI's subnet", n.SubnetID, x.SubnetID)
	same("intent's and ENI's subnet", in.SubnetID, x.SubnetID)
	same("ENI status and its constant", x.Status, ENIAttached)
	same("intent state and its constant", in.State, IntentOpen)

	// A watch event's ID comes from its key; the engine's view keys its
	// maps with it.
	s := &Store{prefix: "/allot/c/"}
	evs := []*clientv3.Event{{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{
		Key: []byte(s.prefix + string(RecordDemand) + "/" + inst), Value: enc(&Demand{InstanceID: inst}), ModRevision: 5,
	}}}
	cs, err := s.decodeEvents(evs, false)
	if err != nil || len(cs) != 1 {
		t.Fatalf("decodeEvents: %v, %d changes", err, len(cs))
	}
	same("a watch change's id and the node's", cs[0].ID, n.InstanceID)
	same("a watch change's record and the node's", cs[0].Record.(Demand).InstanceID, n.InstanceID)
}

// TestInternForgetsWhatNoRecordHolds checks that the table of shared IDs
// does not grow with every ID the broker ever decoded.
func TestInternForgetsWhatNoRecordHolds(t *testing.T) {
	size := func() int {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return len(ids.m)
	}
	before := size()
	held := intern(strings.Repeat("x", 30) + "-held")
	for i := range 1000 {
		_ = intern(strings.Repeat("y", 30) + "-" + strings.Repeat("z", i%7) + time.Duration(i).String())
	}
	if got := size(); got < before+1000 {
		t.Fatalf("table holds %d IDs after 1,001 new ones, had %d", got, before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() > before+1 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := size(); got > before+1 {
		t.Errorf("table holds %d IDs, want %d: it kept IDs no record holds", got, before+1)
	}
	if again := intern(strings.Repeat("x", 30) + "-held"); unsafe.StringData(again) != unsafe.StringData(held) {
		t.Error("an ID still held was forgotten")
	}
	runtime.KeepAlive(held)
}
