package awssim_test

import (
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

// TestScale500Nodes runs 500 instances (500 IMDS listeners) and gives each
// an extra ENI full of addresses from 50 concurrent clients, then checks
// the account's books balance. It guards the O(small) handlers the burst
// benchmark relies on.
func TestScale500Nodes(t *testing.T) {
	if testing.Short() {
		t.Skip("scale test")
	}
	sc := scenario.Scenario{
		VPCs: []scenario.VPC{{CIDRs: []string{"10.0.0.0/16"}, Subnets: []scenario.Subnet{
			{Name: "big", CIDR: "10.0.0.0/16", AZ: "us-east-1a"},
		}}},
		Instances: []scenario.Instance{{Subnet: "big", Type: "m5.large", Count: 500}},
		Throttle:  scenario.Throttle{Disabled: true},
	}
	begin := time.Now()
	h := start(t, awssim.Config{Scenario: sc})
	t.Logf("start with 500 instances: %v", time.Since(begin))
	insts := h.sim.World().Instances()
	subnet := insts[0].SubnetID
	begin = time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(insts))
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(insts); i += 50 {
				id := insts[i].ID
				out, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{
					SubnetId: aws.String(subnet), SecondaryPrivateIpAddressCount: aws.Int32(9),
				})
				if err != nil {
					errs <- err
					return
				}
				if _, err := h.attach(*out.NetworkInterface.NetworkInterfaceId, id, 1); err != nil {
					errs <- err
					return
				}
				d, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{
					Filters: []types.Filter{filter("attachment.instance-id", id)},
				})
				if err != nil || len(d.NetworkInterfaces) != 2 {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("client: %v", err)
	}
	el := time.Since(begin)
	t.Logf("1500 calls from 50 clients: %v (%.0f calls/s)", el, 1500/el.Seconds())
	if got, want := h.available(t, subnet), 65536-5-500-500*10; got != want {
		t.Fatalf("available = %d; want %d", got, want)
	}
}
