package executor_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// TestCorruptNodeRecordQuarantinesOneNode: a node record that does not
// decode, and another node's demand record that does not decode, set those
// two nodes aside (each with a status saying which key is bad) while the
// third node's demand is served; the bad values are left as they were.
func TestCorruptNodeRecordQuarantinesOneNode(t *testing.T) {
	e := newEnv(t, envOpts{nodes: 3})
	ctx := ctxT(t)
	bad, badDemand, good := e.insts[0], e.insts[1], e.insts[2]
	for _, inst := range e.insts {
		e.register(t, inst, 4, 0, nil)
	}
	cli := e.st.Client()
	nodeKey := e.st.Prefix() + "nodes/" + bad.ID
	demandKey := e.st.Prefix() + "demand/" + badDemand.ID
	if _, err := cli.Put(ctx, nodeKey, `{"v":1,"instance_id":`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, demandKey, `{"v":7,"instance_id":"`+badDemand.ID+`"}`); err != nil {
		t.Fatal(err)
	}
	r := e.start(t, executor.Config{})

	waitFor(t, "the sound node's demand served", 30*time.Second, func() (bool, error) {
		return e.satisfied(ctx, map[string]int{good.ID: 4})
	})
	for _, inst := range []string{bad.ID, badDemand.ID} {
		key := nodeKey
		if inst == badDemand.ID {
			key = demandKey
		}
		var st store.NodeStatus
		waitFor(t, "a quarantine status for "+inst, 20*time.Second, func() (bool, error) {
			var err error
			st, err = e.st.GetNodeStatus(ctx, inst)
			if errors.Is(err, rpcerr.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		})
		if st.Reason != store.UnmetQuarantined || !strings.Contains(st.Message, key) {
			t.Errorf("status of %s: %q %q, want %q naming %s", inst, st.Reason, st.Message, store.UnmetQuarantined, key)
		}
		enis, err := e.st.ListNodeENIs(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range enis {
			if !x.Primary {
				t.Errorf("quarantined node %s was given ENI %s", inst, x.ID)
			}
		}
	}
	for key, want := range map[string]string{nodeKey: `{"v":1,"instance_id":`, demandKey: `{"v":7,"instance_id":"` + badDemand.ID + `"}`} {
		resp, err := cli.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
			t.Errorf("bad record %s was changed: %v %v", key, resp, err)
		}
	}
	if r.eng.Stats().Rounds == 0 {
		t.Error("no round ran")
	}
}
