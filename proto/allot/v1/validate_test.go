package allotv1

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
)

func goodNode() *NodeIdentity {
	return &NodeIdentity{
		InstanceId: "i-0123456789abcdef0", InstanceType: "m5.large", AvailabilityZone: "us-east-1a",
		VpcId: "vpc-01234567", SubnetId: "subnet-0123456789abcdef0", PrimaryEniId: "eni-89abcdef",
		PrimaryMac: "02:00:00:aa:bb:cc", PrimaryIp: "10.0.1.4", SecurityGroupIds: []string{"sg-01234567"},
		VpcCidrs: []string{"10.0.0.0/16"},
	}
}

func TestValidate(t *testing.T) {
	node := func(f func(*NodeIdentity)) *RegisterRequest {
		n := goodNode()
		f(n)
		return &RegisterRequest{Node: n}
	}
	for _, tc := range []struct {
		name string
		req  interface{ Validate() error }
		want string // "" = valid; else a fragment of the error
	}{
		{"good register", &RegisterRequest{Node: goodNode(), Mode: AddressMode_ADDRESS_MODE_PREFIX}, ""},
		{"local zone", node(func(n *NodeIdentity) { n.AvailabilityZone = "us-west-2-lax-1a" }), ""},
		{"uppercase instance", node(func(n *NodeIdentity) { n.InstanceId = "i-0123456789ABCDEF0" }), "node.instance_id"},
		{"short instance", node(func(n *NodeIdentity) { n.InstanceId = "i-0123" }), "8 to 17"},
		{"bad type", node(func(n *NodeIdentity) { n.InstanceType = "large" }), "node.instance_type"},
		{"ipv6 primary", node(func(n *NodeIdentity) { n.PrimaryIp = "fd00::1" }), "node.primary_ip"},
		{"short mac", node(func(n *NodeIdentity) { n.PrimaryMac = "02:00:00:aa:bb" }), "node.primary_mac"},
		{"bad sg", node(func(n *NodeIdentity) { n.SecurityGroupIds = []string{"sg-01234567", "default"} }), "security_group_ids[1]"},
		{"bad vpc cidr", node(func(n *NodeIdentity) { n.VpcCidrs = []string{"10.0.0.0"} }), "vpc_cidrs[0]"},
		{"unknown mode", &RegisterRequest{Node: goodNode(), Mode: 7}, "mode"},
		{"node name", &RegisterRequest{Node: goodNode(), NodeName: "ip-10-0-1-23.ec2.internal"}, ""},
		{"node name uppercase", &RegisterRequest{Node: goodNode(), NodeName: "Node-1"}, "node_name"},
		{"node name with a space", &RegisterRequest{Node: goodNode(), NodeName: "node 1"}, "node_name"},
		{"node name too long", &RegisterRequest{Node: goodNode(), NodeName: strings.Repeat("a", 254)}, "node_name"},
		{"negative max_enis", &RegisterRequest{Node: goodNode(), Warm: &WarmTargets{MaxEnis: -1}}, "warm.max_enis"},
		{"usage ok", &ReportUsageRequest{InstanceId: "i-01234567", Assigned: []string{"10.0.0.1"}, Free: []string{"10.0.0.2"}}, ""},
		{"usage cidr", &ReportUsageRequest{InstanceId: "i-01234567", Assigned: []string{"10.0.0.1/32"}}, "assigned[0]"},
		{"usage dup", &ReportUsageRequest{InstanceId: "i-01234567", Free: []string{"10.0.0.2", "10.0.0.2"}}, "free[1]"},
		{"usage mapped v6", &ReportUsageRequest{InstanceId: "i-01234567", Free: []string{"::ffff:10.0.0.2"}}, "free[0]"},
		{"usage excess ok", &ReportUsageRequest{InstanceId: "i-01234567", Free: []string{"10.0.0.2"}, Excess: proto.Int32(1)}, ""},
		{"usage excess beyond free", &ReportUsageRequest{InstanceId: "i-01234567", Free: []string{"10.0.0.2"}, Excess: proto.Int32(2)}, "excess"},
		{"usage negative excess", &ReportUsageRequest{InstanceId: "i-01234567", Excess: proto.Int32(-1)}, "excess"},
		{"demand ok", &SetDemandRequest{InstanceId: "i-01234567", Pending: 3}, ""},
		{"ack empty subset ok", &AckReleaseRequest{InstanceId: "i-01234567", ReleaseId: "rel-0123abcd"}, ""},
		{"ack /27", &AckReleaseRequest{InstanceId: "i-01234567", ReleaseId: "r", Prefixes: []string{"10.0.0.0/27"}}, "/28"},
		{"ack bad release id", &AckReleaseRequest{InstanceId: "i-01234567", ReleaseId: "a/b"}, "release_id"},
		{"set budget ok", &SetSubnetBudgetRequest{SubnetId: "subnet-01234567", Headroom: 10}, ""},
		{"list enis any node", &ListENIsRequest{}, ""},
		{"cni add ok", &CNIRequest{Attachment: &Attachment{Network: "allot", ContainerId: "abc", Ifname: "eth0"}}, ""},
		{"cni without ifname", &CNIRequest{Attachment: &Attachment{Network: "allot", ContainerId: "abc"}}, "attachment.ifname"},
		{"cni gc bad entry", &CNIGCRequest{Network: "allot", Valid: []*Attachment{{Network: "allot"}}}, "valid[0].attachment.container_id"},
		{"cni container id with a slash", &CNIRequest{Attachment: &Attachment{Network: "allot", ContainerId: "a/b", Ifname: "eth0"}}, "attachment.container_id"},
		{"cni network with a space", &CNIRequest{Attachment: &Attachment{Network: "my net", ContainerId: "abc", Ifname: "eth0"}}, "attachment.network"},
		{"cni ifname too long", &CNIRequest{Attachment: &Attachment{Network: "allot", ContainerId: "abc", Ifname: "eth0123456789012"}}, "attachment.ifname"},
		{"cni ifname with a colon", &CNIRequest{Attachment: &Attachment{Network: "allot", ContainerId: "abc", Ifname: "eth0:1"}}, "attachment.ifname"},
		{"cni gc entry without network ok", &CNIGCRequest{Network: "allot", Valid: []*Attachment{{ContainerId: "abc", Ifname: "eth0"}}}, ""},
		{"cni gc entry of another network", &CNIGCRequest{Network: "allot", Valid: []*Attachment{{Network: "other", ContainerId: "abc", Ifname: "eth0"}}}, "valid[0].attachment.network"},
	} {
		err := tc.req.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: unexpected %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error mentioning %q", tc.name, err, tc.want)
		}
	}
}
