package hostnettest

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/allotnet/allot/agent/hostnet"
)

func recorderWithENIs(t *testing.T) *Recorder {
	t.Helper()
	r := NewRecorder()
	for _, c := range []hostnet.ENIConfig{
		{MAC: "02:00:00:00:00:01", DeviceIndex: 0, PrimaryIP: netip.MustParseAddr("10.0.0.10"), Subnet: netip.MustParsePrefix("10.0.0.0/24")},
		{MAC: "02:00:00:00:00:02", DeviceIndex: 1, PrimaryIP: netip.MustParseAddr("10.0.1.10"), Subnet: netip.MustParsePrefix("10.0.1.0/24")},
	} {
		if err := r.SetupENI(c); err != nil {
			t.Fatalf("SetupENI: %v", err)
		}
	}
	return r
}

func recPod(id, addr string, device int) hostnet.PodConfig {
	return hostnet.PodConfig{
		Attachment:  hostnet.Attachment{Network: "allot", ContainerID: id, IfName: "eth0"},
		NetNS:       "/var/run/netns/" + id,
		Address:     netip.MustParseAddr(addr),
		DeviceIndex: device,
	}
}

func TestRecorderValidatesAndRecords(t *testing.T) {
	r := recorderWithENIs(t)
	bad := recPod("c1", "10.0.1.20", 1)
	bad.NetNS = "relative"
	if _, err := r.SetupPod(bad); !errors.Is(err, hostnet.ErrInvalidConfig) {
		t.Errorf("SetupPod(relative netns) = %v, want hostnet.ErrInvalidConfig", err)
	}
	if err := r.SetupSNAT(hostnet.SNATConfig{PrimaryIP: netip.MustParseAddr("10.0.0.10")}); !errors.Is(err, hostnet.ErrInvalidConfig) {
		t.Errorf("SetupSNAT without MAC = %v, want hostnet.ErrInvalidConfig", err)
	}
	good := recPod("c1", "10.0.1.20", 1)
	res, err := r.SetupPod(good)
	if err != nil {
		t.Fatalf("SetupPod: %v", err)
	}
	if res.HostVeth != hostnet.HostVethName(good.Attachment) || res.Gateway != hostnet.PodGateway || res.PodIfName != "eth0" ||
		res.HostVethMAC == res.PodMAC {
		t.Errorf("SetupPod result %+v", res)
	}
	again, _ := r.SetupPod(good)
	if again != res {
		t.Errorf("SetupPod is not idempotent: %+v then %+v", res, again)
	}
	if n := r.Count(OpSetupPod); n != 3 {
		t.Errorf("Count(SetupPod) = %d, want 3", n)
	}
	if f := r.Failures(); len(f) != 2 || f[0].Op != OpSetupPod || f[1].Op != OpSetupSNAT {
		t.Errorf("Failures = %+v, want the bad SetupPod and SetupSNAT", f)
	}
	if pods := r.Pods(); len(pods) != 1 || pods[0] != good {
		t.Errorf("Pods = %+v", pods)
	}
}

func TestRecorderEnforcesENIOrderAndSubnet(t *testing.T) {
	r := NewRecorder()
	p := recPod("c1", "10.0.1.20", 1)
	if _, err := r.SetupPod(p); err == nil {
		t.Errorf("SetupPod on a secondary ENI that was never set up succeeded")
	}
	if err := r.SetupENI(hostnet.ENIConfig{MAC: "02:00:00:00:00:02", DeviceIndex: 1,
		PrimaryIP: netip.MustParseAddr("10.0.1.10"), Subnet: netip.MustParsePrefix("10.0.1.0/24")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetupPod(p); err != nil {
		t.Errorf("SetupPod after SetupENI: %v", err)
	}
	if _, err := r.SetupPod(recPod("c2", "10.0.9.20", 1)); err == nil {
		t.Errorf("SetupPod with an address outside the ENI's subnet succeeded")
	}
	// Primary-ENI pods need no SetupENI (their routes are the node's).
	if _, err := r.SetupPod(recPod("c3", "10.0.0.20", 0)); err != nil {
		t.Errorf("primary-ENI pod: %v", err)
	}
}

func TestRecorderAddressOwnership(t *testing.T) {
	r := recorderWithENIs(t)
	oldPod := recPod("old", "10.0.0.20", 0)
	newPod := recPod("new", "10.0.0.20", 0)
	if _, err := r.SetupPod(oldPod); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetupPod(newPod); !errors.Is(err, hostnet.ErrAddressInUse) {
		t.Fatalf("second attachment with the same address: %v, want hostnet.ErrAddressInUse", err)
	}
	// The old sandbox is gone without a DEL (Reconcile finds it stray and
	// removes it); the address goes to the new one; the old DEL comes late.
	rep, _ := r.Reconcile(nil)
	if err := r.RemoveStray(rep); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SetupPod(newPod); err != nil {
		t.Fatalf("new pod after the old was removed: %v", err)
	}
	if err := r.TeardownPod(oldPod); err != nil {
		t.Fatalf("late TeardownPod(old): %v", err)
	}
	if err := r.CheckPod(newPod); err != nil {
		t.Errorf("new pod after the old one's late DEL: %v", err)
	}
	if _, err := r.SetupPod(recPod("third", "10.0.0.20", 0)); !errors.Is(err, hostnet.ErrAddressInUse) {
		t.Errorf("the late DEL released the new pod's address: %v", err)
	}
}

func TestRecorderCheckAndTeardown(t *testing.T) {
	r := recorderWithENIs(t)
	p := recPod("c1", "10.0.1.20", 1)
	var ce *hostnet.CheckError
	if err := r.CheckPod(p); !errors.As(err, &ce) {
		t.Errorf("CheckPod before setup = %v, want *hostnet.CheckError", err)
	}
	if _, err := r.SetupPod(p); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckPod(p); err != nil {
		t.Errorf("CheckPod after setup: %v", err)
	}
	other := p
	other.Address = netip.MustParseAddr("10.0.1.21")
	if err := r.CheckPod(other); !errors.As(err, &ce) || len(ce.Missing) != 1 {
		t.Errorf("CheckPod with another address = %v, want one missing piece", err)
	}
	for range 2 {
		if err := r.TeardownPod(p); err != nil {
			t.Errorf("TeardownPod: %v", err)
		}
	}
	if len(r.Pods()) != 0 {
		t.Errorf("pods left after teardown: %+v", r.Pods())
	}
}

func TestRecorderReconcile(t *testing.T) {
	r := recorderWithENIs(t)
	a, b, c := recPod("a", "10.0.0.20", 0), recPod("b", "10.0.0.21", 0), recPod("c", "10.0.1.20", 1)
	for _, p := range []hostnet.PodConfig{a, b} {
		if _, err := r.SetupPod(p); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := r.Reconcile([]hostnet.PodConfig{a, c})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Repaired) != 1 || rep.Repaired[0].Attachment != c.Attachment {
		t.Errorf("Repaired = %+v, want c", rep.Repaired)
	}
	if len(rep.StrayLinks) != 1 || rep.StrayLinks[0].Attachment != b.Attachment || rep.StrayLinks[0].Name != hostnet.HostVethName(b.Attachment) {
		t.Errorf("StrayLinks = %+v, want b", rep.StrayLinks)
	}
	if len(r.Pods()) != 3 {
		t.Errorf("Reconcile removed something: %+v", r.Pods())
	}
	if err := r.RemoveStray(rep); err != nil {
		t.Fatal(err)
	}
	if rep, _ := r.Reconcile([]hostnet.PodConfig{a, c}); !rep.Empty() {
		t.Errorf("second Reconcile = %+v, want empty", rep)
	}
	pods, _ := r.ListPods()
	if len(pods) != 2 {
		t.Errorf("ListPods = %+v, want a and c", pods)
	}
}

func TestRecorderFailNext(t *testing.T) {
	r := recorderWithENIs(t)
	boom := errors.New("boom")
	r.FailNext(OpSetupPod, boom)
	p := recPod("c1", "10.0.0.20", 0)
	if _, err := r.SetupPod(p); !errors.Is(err, boom) {
		t.Fatalf("SetupPod with a fault = %v", err)
	}
	if len(r.Pods()) != 0 {
		t.Errorf("a failed SetupPod changed state")
	}
	if _, err := r.SetupPod(p); err != nil {
		t.Errorf("SetupPod after the fault was used: %v", err)
	}
}

// TestRecorderConcurrent runs many ADDs and DELs at once, as an agent under
// a burst does; every address must end up with exactly one owner.
func TestRecorderConcurrent(t *testing.T) {
	r := recorderWithENIs(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				p := recPod(fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("10.0.1.%d", 10+w*25+i), 1)
				if _, err := r.SetupPod(p); err != nil {
					t.Errorf("SetupPod: %v", err)
				}
				if i%5 == 0 {
					if err := r.TeardownPod(p); err != nil {
						t.Errorf("TeardownPod: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if got := len(r.Pods()); got != 8*20 {
		t.Errorf("%d pods, want %d", got, 8*20)
	}
	if n := r.Count(OpSetupPod); n != 200 {
		t.Errorf("Count(SetupPod) = %d, want 200", n)
	}
}
