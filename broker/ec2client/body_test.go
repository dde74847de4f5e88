package ec2client

import (
	"context"
	"testing"

	"github.com/allotnet/allot/awssim/scenario"
)

// TestLargeAnswersFromAFastServer: awssim answers within microseconds; the
// SDK closing the request body as the response arrives used to make
// net/http drop the connection under a response still being read, so a
// DescribeInstances of a dozen instances failed a few times in a hundred
// ("use of closed network connection"). Every call must now succeed.
func TestLargeAnswersFromAFastServer(t *testing.T) {
	sc := testScenario()
	sc.Instances = append(sc.Instances, scenario.Instance{Subnet: testSubnet, Type: "m5.large", Count: 12})
	sim := startSim(t, sc)
	c := newClient(t, sim, nil, 0)
	for i := range 150 {
		got, err := c.DescribeInstances(context.Background(), nil)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if len(got) != 14 {
			t.Fatalf("call %d: %d instances, want 14", i, len(got))
		}
	}
}
