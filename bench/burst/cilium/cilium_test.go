package cilium

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

func TestCalculateNeededIPs(t *testing.T) {
	for _, tc := range []struct{ available, used, pre, minimum, maximum, want int }{
		{0, 0, 8, 0, 56, 8},
		{8, 0, 8, 0, 56, 0},
		{8, 8, 8, 0, 56, 8},
		{16, 10, 8, 0, 56, 2},
		{0, 0, 8, 20, 56, 20},
		{50, 50, 8, 0, 56, 6}, // capped by max-allocate
		{60, 10, 8, 0, 56, 0},
	} {
		if got := calculateNeededIPs(tc.available, tc.used, tc.pre, tc.minimum, tc.maximum); got != tc.want {
			t.Errorf("calculateNeededIPs(%d, %d, %d, %d, %d) = %d, want %d", tc.available, tc.used, tc.pre, tc.minimum, tc.maximum, got, tc.want)
		}
	}
}

// TestOperatorBurst runs the operator at its defaults against awssim for
// two c5.xlarge nodes: each warms to pre-allocate 8, then takes 30 pods
// retried as kubelet retries; every pod must get a distinct address, and
// the operator must never have sent more calls than its limiter allows.
func TestOperatorBurst(t *testing.T) {
	const scale = 50
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sim, err := awssim.Start(ctx, awssim.Config{TimeScale: scale, Seed: 1, Scenario: scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs:      []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{{Name: "a", CIDR: "10.0.0.0/16", AZ: "us-east-1a"}}}},
		Instances: []scenario.Instance{{Subnet: "a", Type: "c5.xlarge"}, {Subnet: "a", Type: "c5.xlarge"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	start := time.Now()
	op, err := New(ctx, Config{EC2Endpoint: sim.EC2Endpoint(), MaxENIs: 4, IPv4PerENI: 15, TimeScale: scale})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Stop()
	var nodes []*Node
	for _, in := range sim.World().Instances() {
		nodes = append(nodes, op.AddNode(in.ID))
	}
	for _, n := range nodes {
		for !n.Settled() {
			if ctx.Err() != nil {
				t.Fatalf("node never warm: %s", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	seen := map[string]bool{}
	for p := range 30 {
		for i, n := range nodes {
			for attempt := 0; ; attempt++ {
				req := cniserver.Request{PodName: fmt.Sprintf("p%d", p),
					Attachment: cniserver.Attachment{Network: "n", ContainerID: fmt.Sprintf("%d-%d-%d", i, p, attempt), IfName: "eth0"}}
				res, err := n.Add(ctx, req)
				if err == nil {
					if a := res.Address.Addr().String(); seen[a] {
						t.Fatalf("%s handed out twice", a)
					} else {
						seen[a] = true
					}
					break
				}
				if !errors.Is(err, cniserver.ErrPoolEmpty) || ctx.Err() != nil {
					t.Fatalf("node %d pod %d: %v (%s)", i, p, err, n)
				}
				time.Sleep(time.Second / scale)
			}
		}
	}
	elapsed := time.Since(start).Seconds() * scale
	if allowed := DefaultBurst + DefaultQPS*elapsed + 1; float64(op.Calls()) > allowed {
		t.Errorf("%d calls in %.0f simulated seconds, more than the limiter allows (%.0f)", op.Calls(), elapsed, allowed)
	}
	var creates int64
	for a, c := range sim.Counters() {
		if a == "CreateNetworkInterface" {
			creates = c.Calls
		}
	}
	if creates == 0 {
		t.Errorf("30 pods on a c5.xlarge fit no ENI without a new one; no CreateNetworkInterface was made")
	}
}
