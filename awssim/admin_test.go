package awssim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

func adminDo(t *testing.T, h *harness, method, path string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, h.sim.AdminEndpoint()+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decode: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func TestAdminCountersInstancesFaults(t *testing.T) {
	h := startDefault(t)
	// Counters: 2 good calls, 1 error.
	_, _ = h.ec2.DescribeSubnets(h.ctx, nil)
	_, _ = h.ec2.DescribeSubnets(h.ctx, nil)
	_ = h.deleteMissing()
	var counters map[string]awssim.ActionCounters
	if st := adminDo(t, h, "GET", "/v1/counters", nil, &counters); st != 200 {
		t.Fatalf("counters status %d", st)
	}
	if c := counters["DescribeSubnets"]; c.Calls != 2 || c.Errors != 0 {
		t.Fatalf("DescribeSubnets counters %+v", c)
	}
	if c := counters["DeleteNetworkInterface"]; c.Calls != 1 || c.Errors != 1 {
		t.Fatalf("DeleteNetworkInterface counters %+v", c)
	}
	var reset map[string]awssim.ActionCounters
	adminDo(t, h, "POST", "/v1/counters/reset", nil, &reset)
	if len(reset) != 0 || len(h.sim.Counters()) != 0 {
		t.Fatalf("after reset: %+v", reset)
	}

	// Nodes join and leave.
	var added []awssim.AdminInstance
	if st := adminDo(t, h, "POST", "/v1/instances", awssim.AddInstancesRequest{Subnet: "b", Type: "m5.large", Count: 2}, &added); st != 201 {
		t.Fatalf("add instances: status %d", st)
	}
	if len(added) != 2 || added[0].IMDSEndpoint == "" || added[0].SubnetID != subnetB {
		t.Fatalf("added %+v", added)
	}
	di, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{added[0].ID, added[1].ID}})
	if err != nil || len(di.Reservations) != 2 {
		t.Fatalf("describe added: %v %+v", err, di)
	}
	if st := adminDo(t, h, "DELETE", "/v1/instances/"+added[0].ID, nil, nil); st != 204 {
		t.Fatalf("delete instance: status %d", st)
	}
	if st := adminDo(t, h, "DELETE", "/v1/instances/"+added[0].ID, nil, nil); st != 404 {
		t.Fatalf("delete again: status %d; want 404", st)
	}
	var list []awssim.AdminInstance
	adminDo(t, h, "GET", "/v1/instances", nil, &list)
	if len(list) != 2 {
		t.Fatalf("%d instances listed; want 2", len(list))
	}
	if st := adminDo(t, h, "POST", "/v1/instances", awssim.AddInstancesRequest{Subnet: "nope", Type: "m5.large"}, nil); st != 400 {
		t.Fatalf("unknown subnet: status %d", st)
	}

	// Faults: every DescribeSubnets fails; latency on CreateTags.
	var fs awssim.FaultsState
	st := adminDo(t, h, "PUT", "/v1/faults", map[string]any{
		"actions": map[string]any{
			"DescribeSubnets": map[string]any{"errorRate": 1.0, "errorCode": "Unavailable"},
			"CreateTags":      map[string]any{"latency": "20s"}, // 20 ms real at 1000x
		},
	}, &fs)
	if st != 200 || fs.Actions["DescribeSubnets"].ErrorRate != 1 {
		t.Fatalf("set faults: %d %+v", st, fs)
	}
	_, err = h.ec2.DescribeSubnets(h.ctx, nil)
	apiErr(t, err, "Unavailable", "")
	begin := time.Now()
	_, _ = h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: []string{missingENI}, Tags: []types.Tag{{Key: aws.String("k")}}})
	if el := time.Since(begin); el < 20*time.Millisecond {
		t.Fatalf("CreateTags took %v; want >= 20ms injected latency", el)
	}
	adminDo(t, h, "PUT", "/v1/faults", map[string]any{"actions": map[string]any{}}, nil)
	if _, err := h.ec2.DescribeSubnets(h.ctx, nil); err != nil {
		t.Fatalf("after clearing faults: %v", err)
	}
	if st := adminDo(t, h, "PUT", "/v1/faults", map[string]any{"actions": map[string]any{"X": map[string]any{"errorRate": 2}}}, nil); st != 400 {
		t.Fatalf("errorRate 2 accepted: %d", st)
	}
	// The consistency window is switchable at runtime.
	adminDo(t, h, "PUT", "/v1/faults", map[string]any{"actions": map[string]any{}, "consistencyWindow": "1h"}, nil)
	id := h.createENI(t, subnetA, 0)
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "")

	// Subnets and throttle views.
	var subnets []world.Subnet
	adminDo(t, h, "GET", "/v1/subnets", nil, &subnets)
	if len(subnets) != 3 || subnets[2].AvailableIPs != 27 {
		t.Fatalf("subnets %+v", subnets)
	}
	var th awssim.ThrottleState
	adminDo(t, h, "PUT", "/v1/throttle", map[string]any{"disabled": false, "buckets": map[string]any{"CreateTags": map[string]any{"capacity": 1, "refill": 0}}}, &th)
	if th.Disabled || th.Buckets["CreateTags"].Capacity != 1 {
		t.Fatalf("throttle state %+v", th)
	}
	tag := func() error {
		_, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{{Key: aws.String("k")}}})
		return err
	}
	if err := tag(); err != nil {
		t.Fatalf("first CreateTags: %v", err)
	}
	if err := tag(); !throttled(err) {
		t.Fatalf("second CreateTags with a 1-token bucket: %v", err)
	}
}

// TestAdminFragmentSubnet: the admin API leaves a subnet with free
// addresses but no free /28, so a prefix request fails with
// InsufficientCidrBlocks while secondary addresses are still given.
func TestAdminFragmentSubnet(t *testing.T) {
	h := startDefault(t)
	var res awssim.FragmentResult
	if st := adminDo(t, h, "POST", "/v1/subnets/"+subnetB+"/fragment", nil, &res); st != 200 || res.Taken == 0 || res.Subnet.AvailableIPs < 16 {
		t.Fatalf("fragment: status %d, %+v", st, res)
	}
	eni := h.createENI(t, subnetB, 0)
	_, err := h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), Ipv4PrefixCount: aws.Int32(1),
	})
	apiErr(t, err, "InsufficientCidrBlocks", "")
	if _, err := h.ec2.AssignPrivateIpAddresses(h.ctx, &ec2.AssignPrivateIpAddressesInput{
		NetworkInterfaceId: aws.String(eni), SecondaryPrivateIpAddressCount: aws.Int32(3),
	}); err != nil {
		t.Fatalf("secondary addresses in the fragmented subnet: %v", err)
	}
	if st := adminDo(t, h, "POST", "/v1/subnets/subnet-0000000000000000f/fragment", nil, nil); st != 400 {
		t.Errorf("fragmenting an unknown subnet: status %d, want 400", st)
	}
}
