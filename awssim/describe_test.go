package awssim_test

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/allotnet/allot/awssim"
)

func filter(name string, values ...string) types.Filter {
	return types.Filter{Name: aws.String(name), Values: values}
}

func (h *harness) eniIDs(t *testing.T, fs ...types.Filter) []string {
	t.Helper()
	out, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: fs})
	if err != nil {
		t.Fatalf("DescribeNetworkInterfaces(%v): %v", fs, err)
	}
	var ids []string
	for _, e := range out.NetworkInterfaces {
		ids = append(ids, *e.NetworkInterfaceId)
	}
	return ids
}

func TestDescribeNetworkInterfacesFilters(t *testing.T) {
	h := startDefault(t)
	inst := "i-0000000000000c5a1"
	mk := func(subnet, desc string, tags map[string]string) string {
		in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), Description: aws.String(desc)}
		if len(tags) > 0 {
			spec := types.TagSpecification{ResourceType: types.ResourceTypeNetworkInterface}
			for k, v := range tags {
				spec.Tags = append(spec.Tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
			}
			in.TagSpecifications = []types.TagSpecification{spec}
		}
		out, err := h.ec2.CreateNetworkInterface(h.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return *out.NetworkInterface.NetworkInterfaceId
	}
	ours1 := mk(subnetA, "allot node-1", map[string]string{"allot.io/cluster": "c1", "allot.io/node": "n1"})
	ours2 := mk(subnetA, "allot node-2", map[string]string{"allot.io/cluster": "c1"})
	theirs := mk(subnetB, "someone else", map[string]string{"allot.io/cluster": "c2"})
	untagged := mk(subnetA, "plain", nil)
	if _, err := h.attach(ours1, inst, 1); err != nil {
		t.Fatal(err)
	}
	primary := h.sim.World().Instances()[0].NetworkInterfaces[0].ID

	cases := []struct {
		name string
		fs   []types.Filter
		want []string
	}{
		{"tag:KEY", []types.Filter{filter("tag:allot.io/cluster", "c1")}, []string{ours1, ours2}},
		{"tag:KEY two values", []types.Filter{filter("tag:allot.io/cluster", "c1", "c2")}, []string{ours1, ours2, theirs}},
		{"tag-key", []types.Filter{filter("tag-key", "allot.io/node")}, []string{ours1}},
		{"status", []types.Filter{filter("status", "available")}, []string{ours2, theirs, untagged}},
		{"attachment.instance-id", []types.Filter{filter("attachment.instance-id", inst)}, []string{primary, ours1}},
		{"subnet-id", []types.Filter{filter("subnet-id", subnetB)}, []string{theirs}},
		{"vpc-id", []types.Filter{filter("vpc-id", "vpc-0123456789abcdef0")}, []string{primary, ours1, ours2, theirs, untagged}},
		{"description wildcard", []types.Filter{filter("description", "allot node-*")}, []string{ours1, ours2}},
		{"description ?", []types.Filter{filter("description", "pla?n")}, []string{untagged}},
		{"AND across filters", []types.Filter{filter("tag:allot.io/cluster", "c1"), filter("status", "available")}, []string{ours2}},
		{"no match", []types.Filter{filter("tag:allot.io/cluster", "nope")}, nil},
	}
	for _, c := range cases {
		if got := h.eniIDs(t, c.fs...); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v; want %v", c.name, got, c.want)
		}
	}
	_, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{filter("colour", "red")}})
	apiErr(t, err, "InvalidParameterValue", "The filter 'colour' is invalid")
	// Several missing IDs are reported together.
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{
		NetworkInterfaceIds: []string{ours1, "eni-0000000000000000a", "eni-0000000000000000b"},
	})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface IDs 'eni-0000000000000000a, eni-0000000000000000b' do not exist")
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-xyz"}})
	apiErr(t, err, "InvalidNetworkInterfaceID.Malformed", "")
}

func TestDescribeNetworkInterfacesPagination(t *testing.T) {
	h := startDefault(t)
	var want []string
	want = append(want, h.sim.World().Instances()[0].NetworkInterfaces[0].ID)
	for range 12 {
		want = append(want, h.createENI(t, subnetA, 0))
	}
	var got []string
	pages := 0
	p := ec2.NewDescribeNetworkInterfacesPaginator(h.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(out.NetworkInterfaces) > 5 {
			t.Fatalf("page of %d > MaxResults 5", len(out.NetworkInterfaces))
		}
		for _, e := range out.NetworkInterfaces {
			got = append(got, *e.NetworkInterfaceId)
		}
	}
	if pages != 3 || !slices.Equal(got, want) {
		t.Fatalf("%d pages with %v; want 3 pages with %v", pages, got, want)
	}
	_, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(3)})
	apiErr(t, err, "InvalidParameterValue", "")
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NextToken: aws.String("garbage")})
	apiErr(t, err, "InvalidPaginationToken", "")
	_, err = h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5), NetworkInterfaceIds: want[:1]})
	apiErr(t, err, "InvalidParameterCombination", "")
}

// TestConsistencyWindow: a new ENI is invisible to Describe (by ID and by
// filter) for the window, though its addresses are already taken; once
// visible, an ENI attached within the window still shows available.
func TestConsistencyWindow(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Disabled = true
	h := start(t, awssim.Config{Scenario: sc, TimeScale: 100, ConsistencyWindow: 30 * time.Second}) // 300 ms real
	before := h.available(t, subnetA)
	id := h.createENI(t, subnetA, 1)
	_, err := h.ec2.DescribeNetworkInterfaces(h.ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '"+id+"' does not exist")
	if ids := h.eniIDs(t, filter("subnet-id", subnetA)); slices.Contains(ids, id) {
		t.Fatal("new ENI visible to a filtered Describe inside the window")
	}
	if got := h.available(t, subnetA); got != before-2 {
		t.Fatalf("available = %d; want %d (addresses taken at once)", got, before-2)
	}
	// Mutating calls see it at once.
	if _, err := h.attach(id, "i-0000000000000c5a1", 1); err != nil {
		t.Fatalf("attach inside the window: %v", err)
	}
	h.waitSim(31 * time.Second)
	if got := h.describeENI(t, id); *got.NetworkInterfaceId != id || got.Status != types.NetworkInterfaceStatusInUse {
		t.Fatalf("ENI after the window: %s %s", aws.ToString(got.NetworkInterfaceId), got.Status)
	}

	// Attached inside the window of an ENI Describe already shows.
	id2 := h.createENI(t, subnetA, 1)
	h.waitSim(31 * time.Second)
	if _, err := h.attach(id2, "i-0000000000000c5a1", 2); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if got := h.describeENI(t, id2); got.Status != types.NetworkInterfaceStatusAvailable || got.Attachment != nil {
		t.Fatalf("ENI attached inside the window shows %s, attachment %v; want available, none", got.Status, got.Attachment)
	}
	h.waitSim(31 * time.Second)
	if got := h.describeENI(t, id2); got.Status != types.NetworkInterfaceStatusInUse || got.Attachment == nil {
		t.Fatalf("ENI after the window shows %s, attachment %v; want in-use, attached", got.Status, got.Attachment)
	}
}

func TestDescribeInstancesAndTypes(t *testing.T) {
	h := startDefault(t)
	inst := "i-0000000000000c5a1"
	eni := h.createENI(t, subnetA, 2)
	if _, err := h.attach(eni, inst, 1); err != nil {
		t.Fatal(err)
	}
	m5 := h.addInstance(t, "m5.large", subnetB)
	out, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("reservations %+v", out.Reservations)
	}
	i := out.Reservations[0].Instances[0]
	if *i.InstanceId != inst || i.InstanceType != types.InstanceTypeC5Xlarge || i.State.Name != types.InstanceStateNameRunning ||
		*i.Placement.AvailabilityZone != "us-east-1a" || *i.SubnetId != subnetA || len(i.NetworkInterfaces) != 2 {
		t.Fatalf("instance %+v", i)
	}
	if e := i.NetworkInterfaces[1]; *e.NetworkInterfaceId != eni || *e.Attachment.DeviceIndex != 1 || len(e.PrivateIpAddresses) != 3 {
		t.Fatalf("second interface %+v", e)
	}
	if *i.NetworkInterfaces[0].Attachment.DeviceIndex != 0 || *i.PrivateIpAddress != *i.NetworkInterfaces[0].PrivateIpAddress {
		t.Fatalf("primary interface %+v", i.NetworkInterfaces[0])
	}
	out, err = h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{filter("instance-type", "m5.*")}})
	if err != nil || len(out.Reservations) != 1 || *out.Reservations[0].Instances[0].InstanceId != m5 {
		t.Fatalf("filter instance-type: %v %+v", err, out)
	}
	_, err = h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	apiErr(t, err, "InvalidInstanceID.NotFound", "The instance ID 'i-0123456789abcdef0' does not exist")

	types5 := map[types.InstanceType][2]int32{"c5.xlarge": {4, 15}, "m5.large": {3, 10}, "r5.2xlarge": {4, 15}, "m5.24xlarge": {15, 50}, "t3.medium": {3, 6}}
	var names []types.InstanceType
	for n := range types5 {
		names = append(names, n)
	}
	it, err := h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(it.InstanceTypes) != 5 {
		t.Fatalf("%d types", len(it.InstanceTypes))
	}
	for _, x := range it.InstanceTypes {
		w := types5[x.InstanceType]
		if *x.NetworkInfo.MaximumNetworkInterfaces != w[0] || *x.NetworkInfo.Ipv4AddressesPerInterface != w[1] ||
			x.Hypervisor != types.InstanceTypeHypervisorNitro || *x.VCpuInfo.DefaultVCpus == 0 {
			t.Errorf("%s: %+v", x.InstanceType, x.NetworkInfo)
		}
	}
	_, err = h.ec2.DescribeInstanceTypes(h.ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"z9.huge"}})
	apiErr(t, err, "InvalidInstanceType", "")
	// Paginating the whole catalog.
	n := 0
	p := ec2.NewDescribeInstanceTypesPaginator(h.ec2, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		page, err := p.NextPage(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.InstanceTypes)
	}
	if n != len(h.sim.World().InstanceTypes()) {
		t.Fatalf("paginated %d types; catalog has %d", n, len(h.sim.World().InstanceTypes()))
	}
}

func TestDescribeSubnets(t *testing.T) {
	h := startDefault(t)
	out, err := h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{filter("availability-zone", "us-east-1a")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Subnets) != 2 {
		t.Fatalf("%d subnets in us-east-1a; want 2", len(out.Subnets))
	}
	s := out.Subnets[0]
	if *s.SubnetId != subnetA || *s.CidrBlock != "10.0.0.0/24" || *s.AvailableIpAddressCount != 250 || *s.VpcId != "vpc-0123456789abcdef0" {
		t.Fatalf("subnet %+v", s)
	}
	out, err = h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: []types.Filter{filter("tag:Name", "small")}})
	if err != nil || len(out.Subnets) != 1 || *out.Subnets[0].SubnetId != subnetSmall {
		t.Fatalf("tag:Name filter: %v %+v", err, out)
	}
	_, err = h.ec2.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{"subnet-0123456789abcdef0"}})
	apiErr(t, err, "InvalidSubnetID.NotFound", "The subnet ID 'subnet-0123456789abcdef0' does not exist")
}

func TestTags(t *testing.T) {
	h := startDefault(t)
	eni := h.createENI(t, subnetA, 0)
	inst := "i-0000000000000c5a1"
	if _, err := h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{
		Resources: []string{eni, inst},
		Tags:      []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}, {Key: aws.String("b"), Value: aws.String("2")}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.eniIDs(t, filter("tag:a", "1")); !slices.Equal(got, []string{eni}) {
		t.Fatalf("tag:a = %v", got)
	}
	di, err := h.ec2.DescribeInstances(h.ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{filter("tag:b", "2")}})
	if err != nil || len(di.Reservations) != 1 {
		t.Fatalf("instance tag filter: %v %+v", err, di)
	}
	// Delete b only when its value matches; delete a regardless.
	if _, err := h.ec2.DeleteTags(h.ctx, &ec2.DeleteTagsInput{
		Resources: []string{eni}, Tags: []types.Tag{{Key: aws.String("b"), Value: aws.String("wrong")}, {Key: aws.String("a")}},
	}); err != nil {
		t.Fatal(err)
	}
	got := h.describeENI(t, eni)
	if len(got.TagSet) != 1 || *got.TagSet[0].Key != "b" {
		t.Fatalf("tags after delete %+v", got.TagSet)
	}
	_, err = h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{
		Resources: []string{"eni-0123456789abcdef0"}, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}},
	})
	apiErr(t, err, "InvalidNetworkInterfaceID.NotFound", "The networkInterface ID 'eni-0123456789abcdef0' does not exist")
	_, err = h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{
		Resources: []string{eni}, Tags: []types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("1")}},
	})
	apiErr(t, err, "InvalidParameterValue", "")
	_, err = h.ec2.CreateTags(h.ctx, &ec2.CreateTagsInput{
		Resources: []string{"bogus-1"}, Tags: []types.Tag{{Key: aws.String("a"), Value: aws.String("1")}},
	})
	apiErr(t, err, "InvalidID", "")
}
