package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/brokerlink/brokertest"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
)

// Addresses the broker delivers on an ENI the agent has set up (here the
// primary) are handed out from the broker's record at once, though IMDS
// doesn't show them: EC2's answer decides, and IMDS lags it.
func TestDeliveredAddressesOnASetUpENIDoNotWaitForIMDS(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.IMDSCheckAfter = -1
	a := e.start(cfg, hostnettest.NewRecorder())
	e.registered()
	e.sim.World().SetIMDSLag(time.Hour) // IMDS shows nothing delivered from now on
	got, err := e.broker.Deliver(e.inst, 2)
	if err != nil {
		t.Fatal(err)
	}
	res := mustAdd(t, a, podReq("c1", "web-0"))
	if !slices.Contains(got, res.Address.Addr().String()) {
		t.Fatalf("address %v, want one of the delivered %v", res.Address, got)
	}
	prim, _ := a.Identity().Primary()
	if res.ENIID != prim.ENIID {
		t.Fatalf("address on %s, want the primary %s", res.ENIID, prim.ENIID)
	}
	if n := a.BrokerStatus().Unconfirmed; n != 0 {
		t.Fatalf("%d addresses still awaited, want none", n)
	}
}

// A new ENI still waits until IMDS shows it: its device and MAC set up the
// host side, and until then none of its addresses is handed out.
func TestNewENIWaitsForIMDS(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.IMDSCheckAfter = -1
	net := hostnettest.NewRecorder()
	a := e.start(cfg, net)
	e.registered()
	setups := net.Count(hostnettest.OpSetupENI)
	e.sim.World().SetIMDSLag(time.Hour)
	id, got, err := e.broker.AttachENI(e.inst, 2)
	if err != nil {
		t.Fatal(err)
	}
	brokertest.WaitFor(t, 10*time.Second, "the new ENI's addresses awaited", func() bool {
		return a.BrokerStatus().Unconfirmed == 2
	})
	if _, err := addWithin(t, a, podReq("c1", "web-0"), 200*time.Millisecond); !isPoolEmpty(err) {
		t.Fatalf("add while IMDS doesn't show the new ENI: %v, want pool empty", err)
	}
	if n := net.Count(hostnettest.OpSetupENI); n != setups {
		t.Fatalf("SetupENI called %d times before IMDS showed the ENI, want %d", n, setups)
	}
	e.sim.World().SetIMDSLag(0)
	res := mustAdd(t, a, podReq("c2", "web-1"))
	if res.ENIID != id || !slices.Contains(got, res.Address.Addr().String()) {
		t.Fatalf("address %v on %s, want one of %v on the new ENI %s", res.Address, res.ENIID, got, id)
	}
	if n := net.Count(hostnettest.OpSetupENI); n != setups+1 {
		t.Fatalf("SetupENI called %d times, want %d (the new ENI once)", n, setups+1)
	}
}

// The background check counts delivered addresses IMDS still doesn't show
// after it, and only those: the address the broker took back is not
// counted.
func TestIMDSCheckCountsDisagreement(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.IMDSCheckAfter = 3 * time.Second // the address is taken back well within it
	a := e.start(cfg, hostnettest.NewRecorder())
	e.registered()
	e.sim.World().SetIMDSLag(time.Hour)
	got := e.deliver(a, 3)
	e.broker.Forget(e.inst, []string{got[0].String()})
	brokertest.WaitFor(t, 10*time.Second, "the pool to drop the address taken back", func() bool {
		return a.Pool().Stats().Total == 2
	})
	brokertest.WaitFor(t, 10*time.Second, "the check to count the addresses IMDS doesn't show", func() bool {
		return a.IMDSDisagreements() >= 2
	})
	time.Sleep(cfg.IMDSCheckAfter)
	if n := a.IMDSDisagreements(); n != 2 {
		t.Fatalf("%d disagreements, want 2 (the third address was taken back)", n)
	}
}

// An ENI IMDS doesn't show yet is asked about four times as often in the
// first ten intervals (IMDS shows an attach about a second late, and the
// wait after it is what the ENI's pods wait for), then at the interval.
func TestConfirmWaitAsksOftenAtFirst(t *testing.T) {
	iv := DefaultConfirmInterval
	for _, c := range []struct {
		elapsed, interval, want time.Duration
	}{
		{0, iv, 50 * time.Millisecond},
		{time.Second, iv, 50 * time.Millisecond},
		{2*time.Second - time.Millisecond, iv, 50 * time.Millisecond},
		{2 * time.Second, iv, iv},
		{time.Minute, iv, iv},
		{0, 40 * time.Millisecond, 10 * time.Millisecond}, // a scaled interval scales the window too
		{400 * time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond},
		{0, 2 * time.Millisecond, time.Millisecond}, // never below a millisecond
	} {
		if got := confirmWait(c.elapsed, c.interval); got != c.want {
			t.Errorf("confirmWait(%v, %v) = %v, want %v", c.elapsed, c.interval, got, c.want)
		}
	}
}
