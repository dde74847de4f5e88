package daemon

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
)

// Hundreds of concurrent ADDs and DELs, many racing on the same container
// IDs, leave the pool, the checkpoint on disk and the host in agreement,
// with no address held twice.
func TestAddDelStormKeepsRecordsAndHostInAgreement(t *testing.T) {
	e := newEnv(t)
	net := hostnettest.NewRecorder()
	cfg := e.config()
	cfg.Cooldown = -1
	a := e.start(cfg, net)
	e.deliver(a, 14)

	const workers, ops, ids = 16, 30, 12
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				cid := fmt.Sprintf("c%02d", rng.IntN(ids))
				req := podReq(cid, "pod-"+cid)
				if rng.IntN(3) == 0 {
					if err := a.Del(ctxT(t), req); err != nil {
						t.Errorf("del %s: %v", cid, err)
					}
					continue
				}
				if _, err := a.Add(ctxT(t), req); err != nil {
					t.Errorf("add %s: %v", cid, err)
				}
			}
		})
	}
	wg.Wait()
	a.WaitTeardowns()

	als := a.Pool().Allocations()
	pods := net.Pods()
	if len(als) != len(pods) {
		t.Fatalf("%d allocations but %d pods wired", len(als), len(pods))
	}
	byAtt := map[hostnet.Attachment]netip.Addr{}
	for _, p := range pods {
		byAtt[p.Attachment] = p.Address
	}
	seen := map[netip.Addr]bool{}
	for _, al := range als {
		if seen[al.Addr] {
			t.Fatalf("address %v held twice", al.Addr)
		}
		seen[al.Addr] = true
		if got, ok := byAtt[attachment(al.Key)]; !ok || got != al.Addr {
			t.Fatalf("%v holds %v but the host has %v (%v)", al.Key, al.Addr, got, ok)
		}
	}
	disk, err := checkpoint.New(e.checkpointPath()).Load()
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, disk.Allocations, a.Pool().Snapshot().Allocations) {
		t.Fatal("checkpoint on disk disagrees with the pool")
	}
	if s := a.Pool().Stats(); s.Assigned != len(als) || s.Total != 14 {
		t.Fatalf("pool stats %+v after the storm, want %d assigned of 14", s, len(als))
	}
}
