package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
)

// A restart — even onto a host that lost the pods' wiring, with the broker
// unreachable — frees nothing: every allocation and free address comes back
// from the checkpoint, every pod is wired again, and a retried ADD gets its
// address back.
func TestRestartFreesNothingAndRestoresPods(t *testing.T) {
	e := newEnv(t)
	first := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(first, 4)
	reqs := []string{"c1", "c2"}
	addrs := map[string]string{}
	for _, cid := range reqs {
		addrs[cid] = mustAdd(t, first, podReq(cid, "pod-"+cid)).Address.String()
	}
	if err := first.Del(ctxT(t), podReq("c2", "pod-c2")); err != nil {
		t.Fatal(err)
	}
	before := first.Pool().Snapshot()
	first.stop()

	e.broker.SetDown(true)
	net := hostnettest.NewRecorder() // the host lost every pod's wiring
	second := e.start(e.config(), net)
	after := second.Pool().Snapshot()
	if !sameJSON(t, before.Allocations, after.Allocations) {
		t.Fatalf("allocations changed across restart:\n before %+v\n after  %+v", before.Allocations, after.Allocations)
	}
	if !sameJSON(t, before.Addresses, after.Addresses) {
		t.Fatalf("addresses changed across restart:\n before %+v\n after  %+v", before.Addresses, after.Addresses)
	}
	if n := net.Count(hostnettest.OpTeardownPod) + net.Count(hostnettest.OpRemoveStray); n != 0 {
		t.Fatalf("restart tore down or removed %d things", n)
	}
	if addr, ok := wired(net, podReq("c1", "pod-c1")); !ok || addr.String()+"/32" != addrs["c1"] {
		t.Fatalf("pod c1 not rewired on restart: %v %v, want %s", addr, ok, addrs["c1"])
	}
	if _, ok := wired(net, podReq("c2", "pod-c2")); ok {
		t.Fatal("deleted pod c2 rewired on restart")
	}
	again := mustAdd(t, second, podReq("c1", "pod-c1"))
	if again.Address.String() != addrs["c1"] {
		t.Fatalf("retried ADD after restart got %v, want %s", again.Address, addrs["c1"])
	}
	if n := e.broker.Calls("AckRelease"); n != 0 {
		t.Fatalf("restart acknowledged %d releases", n)
	}
}

// A corrupt or truncated checkpoint stops the start with a clear error; the
// file is left untouched and the host network is not touched at all. The
// damage is in the file's first record, which is written whole or not at
// all; a damaged last record is a torn append, dropped (the checkpoint
// package's tests).
func TestCorruptCheckpointRefusesStart(t *testing.T) {
	e := newEnv(t)
	first := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(first, 2)
	mustAdd(t, first, podReq("c1", "web-0"))
	first.stop()
	good, err := os.ReadFile(e.checkpointPath())
	if err != nil {
		t.Fatal(err)
	}
	rec0 := good[:bytes.IndexByte(good, '\n')+1]
	flipped := bytes.Replace(rec0, []byte(`"usageSeq":`), []byte(`"usageSeq":9`), 1)
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"truncated", good[:len(rec0)/2], checkpoint.ErrCorrupt},
		{"garbage", []byte("\x00\x01not a checkpoint"), checkpoint.ErrCorrupt},
		{"flipped byte", append(flipped, good[len(rec0):]...), checkpoint.ErrCorrupt},
		{"future version", []byte(`{"version": 99, "state": {}}`), checkpoint.ErrUnsupportedVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(e.checkpointPath(), tc.body, 0o600); err != nil {
				t.Fatal(err)
			}
			net := hostnettest.NewRecorder()
			a, err := New(e.config(), Deps{IMDS: e.imds, Network: net, Broker: e.broker.Client(), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			err = a.Start(context.Background())
			if !errors.Is(err, ErrCheckpoint) || !errors.Is(err, tc.want) {
				t.Fatalf("start: %v, want ErrCheckpoint wrapping %v", err, tc.want)
			}
			if a.Ready() {
				t.Fatal("agent ready after refusing its checkpoint")
			}
			if got, _ := os.ReadFile(e.checkpointPath()); !bytes.Equal(got, tc.body) {
				t.Fatal("checkpoint file changed by a refused start")
			}
			if n := len(net.Calls()); n != 0 {
				t.Fatalf("refused start made %d host network calls", n)
			}
		})
	}
}

// A checkpoint of another instance (a reused disk) is refused too.
func TestCheckpointOfAnotherInstanceRefused(t *testing.T) {
	e := newEnv(t)
	other := checkpoint.State{InstanceID: "i-0123456789abcdef0"}
	if err := checkpoint.New(e.checkpointPath()).Save(other); err != nil {
		t.Fatal(err)
	}
	a, err := New(e.config(), Deps{IMDS: e.imds, Network: hostnettest.NewRecorder(), Broker: e.broker.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); !errors.Is(err, ErrCheckpoint) {
		t.Fatalf("start on another instance's checkpoint: %v, want ErrCheckpoint", err)
	}
}

// sameJSON compares as the checkpoint stores them (times without their
// monotonic reading).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}

// A pod on a secondary ENI: the ENI's host side is set up before its
// addresses are handed out. After a restart on which the ENI can't be set
// up (its link not there yet), the pod's record is kept, and its wiring
// comes back once the broker link sets the ENI up.
func TestSecondaryENIPodRestoredWhenENIAppears(t *testing.T) {
	e := newEnv(t)
	first := e.start(e.config(), hostnettest.NewRecorder())
	e.registered()
	eniID, addrs, err := e.broker.AttachENI(e.inst, 2)
	if err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFor(t, 10*time.Second, "the new ENI's addresses in the pool", func() bool {
		return first.Pool().Stats().Total == 2
	})
	res := mustAdd(t, first, podReq("c1", "web-0"))
	if res.ENIID != eniID || !slices.Contains(addrs, res.Address.Addr().String()) {
		t.Fatalf("pod got %v on %s, want one of %v on %s", res.Address, res.ENIID, addrs, eniID)
	}
	first.stop()

	// The secondary ENI's setup fails at start (the primary's succeeds);
	// the broker is down, so nothing retries it for now.
	e.broker.SetDown(true)
	net := hostnettest.NewRecorder()
	net.FailNext(hostnettest.OpSetupENI, nil)
	net.FailNext(hostnettest.OpSetupENI, errors.New("injected: no link with the ENI's MAC yet"))
	second := e.start(e.config(), net)
	if _, ok := second.Pool().Get(keyOf(podReq("c1", "web-0").Attachment)); !ok {
		t.Fatal("record of the pod on the unseen ENI dropped on restart")
	}
	if _, ok := wired(net, podReq("c1", "web-0")); ok {
		t.Fatal("pod wired before its ENI was set up")
	}
	e.broker.SetDown(false)
	brokertest.WaitFor(t, 20*time.Second, "the pod rewired once its ENI is set up", func() bool {
		addr, ok := wired(net, podReq("c1", "web-0"))
		return ok && addr == res.Address.Addr()
	})
}
