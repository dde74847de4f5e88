package awssim_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.events = append(r.events, s)
	r.mu.Unlock()
}

func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// TestHooks checks the data-plane hooks fire for the scenario's primary
// ENIs, attach, address changes and (after the delay) detach, in order.
func TestHooks(t *testing.T) {
	rec := &recorder{}
	hooks := world.HookFuncs{
		Attach: func(inst string, e world.NetworkInterface) {
			rec.add(fmt.Sprintf("attach %s %s %d", inst, e.ID, e.Attachment.DeviceIndex))
		},
		Detach: func(inst string, e world.NetworkInterface) { rec.add(fmt.Sprintf("detach %s %s", inst, e.ID)) },
		AddressesChanged: func(e world.NetworkInterface) {
			rec.add(fmt.Sprintf("addresses %s %d", e.ID, len(e.SecondaryIPs)))
		},
	}
	sc := testScenario()
	sc.Throttle.Disabled = true
	h := start(t, awssim.Config{Scenario: sc, Hooks: hooks, DetachDelay: 5 * time.Second})
	inst := "i-0000000000000c5a1"
	primary := h.sim.World().Instances()[0].NetworkInterfaces[0].ID
	eni := h.createENI(t, subnetA, 0)
	att, err := h.attach(eni, inst, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.assign(eni, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ec2.DetachNetworkInterface(h.ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(att)}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("attach %s %s 0", inst, primary),
		fmt.Sprintf("attach %s %s 1", inst, eni),
		fmt.Sprintf("addresses %s 3", eni),
		fmt.Sprintf("detach %s %s", inst, eni),
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(rec.snapshot()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the ticker completes the detach
	}
	got := rec.snapshot()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("hook events:\n got %q\nwant %q", got, want)
	}
}
