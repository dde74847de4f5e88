package awssim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/internal/freeport"
)

// TestIMDSPortBasePinsPortsInLaunchOrder: with IMDSPortBase the n-th
// instance's IMDS is on base+n, so a command line can name it in advance.
func TestIMDSPortBasePinsPortsInLaunchOrder(t *testing.T) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		base := freePort(t)
		sim, err := awssim.Start(context.Background(), awssim.Config{
			Scenario: scenario.Default(), IMDSPortBase: base, AdminAddr: "off", Seed: 1,
		})
		if err != nil {
			lastErr = err // base+n may be someone else's; try another base
			continue
		}
		defer sim.Close()
		insts := sim.World().Instances()
		if len(insts) < 2 {
			t.Fatalf("default scenario has %d instances", len(insts))
		}
		for i, inst := range insts {
			got, err := sim.IMDSEndpoint(inst.ID)
			if want := fmt.Sprintf("http://127.0.0.1:%d", base+i); err != nil || got != want {
				t.Errorf("instance %d (%s): IMDS %s, %v; want %s", i, inst.ID, got, err, want)
			}
		}
		return
	}
	t.Fatalf("no free run of ports for the IMDS listeners: %v", lastErr)
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
