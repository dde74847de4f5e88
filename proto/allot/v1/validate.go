package allotv1

// This file is written by hand (protoc does not generate it). Each request
// type gets a Validate method, which go-grpc-middleware's validator
// interceptor calls before a handler runs; an error becomes InvalidArgument
// with the error's text. Messages name the field and say what was expected,
// so an agent's log tells its operator exactly what to fix.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
)

// maxListLen bounds the repeated fields of one request. A node holds at most
// a few thousand addresses (15 ENIs × 49 prefixes × 16 on the largest
// types); anything bigger is a bug or an attack.
const maxListLen = 16384

var (
	instanceIDRe   = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)
	subnetIDRe     = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	eniIDRe        = regexp.MustCompile(`^eni-[0-9a-f]{8,17}$`)
	vpcIDRe        = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	sgIDRe         = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	instanceTypeRe = regexp.MustCompile(`^[a-z][a-z0-9-]*\.[a-z0-9]+$`)
	azRe           = regexp.MustCompile(`^[a-z]{2}-[a-z0-9-]*[0-9][a-z]$`)
	releaseIDRe    = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
	// nodeNameRe is a Kubernetes object name (an RFC 1123 subdomain), which
	// node names are; the length is checked apart.
	nodeNameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// maxNodeNameLen is Kubernetes' limit on a node name.
const maxNodeNameLen = 253

// quoteLimit is how much of a bad value an error quotes: enough to see what
// was sent, never enough to turn a megabyte of garbage into a megabyte of
// error text and log lines.
const quoteLimit = 48

// quote renders v for an error message: quoted, and cut to quoteLimit bytes
// with its full length noted when longer.
func quote(v string) string {
	if len(v) <= quoteLimit {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:quoteLimit], len(v))
}

// fieldErr builds "field: problem" errors.
func fieldErr(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
}

func checkID(field, v string, re *regexp.Regexp, want string) error {
	if v == "" {
		return fieldErr(field, "required (want %s)", want)
	}
	if !re.MatchString(v) {
		return fieldErr(field, "%s is not valid (want %s)", quote(v), want)
	}
	return nil
}

func checkInstanceID(field, v string) error {
	return checkID(field, v, instanceIDRe, `an EC2 instance ID, "i-" and 8 to 17 lowercase hex digits`)
}

func checkSubnetID(field, v string) error {
	return checkID(field, v, subnetIDRe, `a subnet ID, "subnet-" and 8 to 17 lowercase hex digits`)
}

// checkIPv4 accepts a plain dotted-quad IPv4 address (no CIDR, no zone, no
// IPv4-mapped IPv6).
func checkIPv4(field, v string) error {
	a, err := netip.ParseAddr(v)
	if err != nil || !a.Is4() {
		return fieldErr(field, "%s is not an IPv4 address", quote(v))
	}
	return nil
}

// checkAddrList checks a repeated IPv4 field for size, syntax and
// duplicates; seen (may be nil) collects addresses across fields.
func checkAddrList(field string, vs []string, seen map[string]string) error {
	if len(vs) > maxListLen {
		return fieldErr(field, "%d entries, more than the limit of %d", len(vs), maxListLen)
	}
	if seen == nil {
		seen = make(map[string]string, len(vs))
	}
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkIPv4(f, v); err != nil {
			return err
		}
		if prev, dup := seen[v]; dup {
			return fieldErr(f, "%s is listed twice (also in %s)", v, prev)
		}
		seen[v] = f
	}
	return nil
}

// checkPrefixList checks a repeated field of delegated /28 IPv4 prefixes.
func checkPrefixList(field string, vs []string) error {
	if len(vs) > maxListLen {
		return fieldErr(field, "%d entries, more than the limit of %d", len(vs), maxListLen)
	}
	seen := make(map[netip.Prefix]bool, len(vs))
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is4() {
			return fieldErr(f, "%s is not an IPv4 prefix", quote(v))
		}
		if p.Bits() != 28 || p.Masked() != p {
			return fieldErr(f, "%s is not a /28 prefix on a /28 boundary (EC2 delegates /28s)", quote(v))
		}
		if seen[p] {
			return fieldErr(f, "%s is listed twice", v)
		}
		seen[p] = true
	}
	return nil
}

func checkNonNegative(field string, v int64) error {
	if v < 0 {
		return fieldErr(field, "must not be negative, got %d", v)
	}
	return nil
}

// Validate checks the node identity an agent learned from IMDS.
func (x *NodeIdentity) Validate() error {
	if x == nil {
		return errors.New("node: required")
	}
	if err := checkInstanceID("node.instance_id", x.GetInstanceId()); err != nil {
		return err
	}
	if t := x.GetInstanceType(); !instanceTypeRe.MatchString(t) {
		return fieldErr("node.instance_type", "%s is not an EC2 instance type (want e.g. \"m5.large\")", quote(t))
	}
	if az := x.GetAvailabilityZone(); !azRe.MatchString(az) {
		return fieldErr("node.availability_zone", "%s is not an availability zone (want e.g. \"us-east-1a\")", quote(az))
	}
	if err := checkID("node.vpc_id", x.GetVpcId(), vpcIDRe, `a VPC ID, "vpc-" and 8 to 17 lowercase hex digits`); err != nil {
		return err
	}
	if err := checkSubnetID("node.subnet_id", x.GetSubnetId()); err != nil {
		return err
	}
	if err := checkID("node.primary_eni_id", x.GetPrimaryEniId(), eniIDRe, `an ENI ID, "eni-" and 8 to 17 lowercase hex digits`); err != nil {
		return err
	}
	if m, err := net.ParseMAC(x.GetPrimaryMac()); err != nil || len(m) != 6 {
		return fieldErr("node.primary_mac", "%s is not a 48-bit MAC address", quote(x.GetPrimaryMac()))
	}
	if err := checkIPv4("node.primary_ip", x.GetPrimaryIp()); err != nil {
		return err
	}
	for i, sg := range x.GetSecurityGroupIds() {
		if err := checkID(fmt.Sprintf("node.security_group_ids[%d]", i), sg, sgIDRe, `a security group ID, "sg-" and 8 to 17 lowercase hex digits`); err != nil {
			return err
		}
	}
	for i, c := range x.GetVpcCidrs() {
		if p, err := netip.ParsePrefix(c); err != nil || !p.Addr().Is4() {
			return fieldErr(fmt.Sprintf("node.vpc_cidrs[%d]", i), "%s is not an IPv4 CIDR", quote(c))
		}
	}
	return nil
}

// Validate checks the warm-pool targets; all are counts.
func (x *WarmTargets) Validate() error {
	if x == nil {
		return nil // no targets: the broker's defaults apply
	}
	for _, c := range []struct {
		field string
		v     int32
	}{
		{"warm.warm_ip_target", x.GetWarmIpTarget()},
		{"warm.minimum_ip_target", x.GetMinimumIpTarget()},
		{"warm.warm_eni_target", x.GetWarmEniTarget()},
		{"warm.warm_prefix_target", x.GetWarmPrefixTarget()},
		{"warm.max_enis", x.GetMaxEnis()},
	} {
		if err := checkNonNegative(c.field, int64(c.v)); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a registration. An unspecified mode means secondary IPs.
func (x *RegisterRequest) Validate() error {
	if err := x.GetNode().Validate(); err != nil {
		return err
	}
	if _, ok := AddressMode_name[int32(x.GetMode())]; !ok {
		return fieldErr("mode", "unknown address mode %d", x.GetMode())
	}
	if err := CheckNodeName(x.GetNodeName()); err != nil {
		return fieldErr("node_name", "%v", err)
	}
	return x.GetWarm().Validate()
}

// CheckNodeName accepts an empty name (not on Kubernetes) or a Kubernetes
// node name. The agent checks its --node-name with it too, so a bad one is
// refused at start rather than at every registration.
func CheckNodeName(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxNodeNameLen || !nodeNameRe.MatchString(v) {
		return fmt.Errorf("%s is not a Kubernetes node name (want lowercase letters, digits, '-' and '.', at most %d characters)",
			quote(v), maxNodeNameLen)
	}
	return nil
}

// Validate checks a usage report: IPv4 addresses, none listed twice, none
// both assigned and free, and an excess that counts free addresses.
func (x *ReportUsageRequest) Validate() error {
	if err := checkInstanceID("instance_id", x.GetInstanceId()); err != nil {
		return err
	}
	seen := make(map[string]string, len(x.GetAssigned())+len(x.GetFree()))
	if err := checkAddrList("assigned", x.GetAssigned(), seen); err != nil {
		return err
	}
	if err := checkAddrList("free", x.GetFree(), seen); err != nil {
		return err
	}
	if err := checkNonNegative("excess", int64(x.GetExcess())); err != nil {
		return err
	}
	if n := len(x.GetFree()); int(x.GetExcess()) > n {
		return fieldErr("excess", "%d is more than the %d free addresses listed", x.GetExcess(), n)
	}
	return nil
}

// Validate checks a demand statement.
func (x *SetDemandRequest) Validate() error {
	if err := checkInstanceID("instance_id", x.GetInstanceId()); err != nil {
		return err
	}
	if err := checkNonNegative("pending", int64(x.GetPending())); err != nil {
		return err
	}
	if err := checkNonNegative("warm_shortfall", int64(x.GetWarmShortfall())); err != nil {
		return err
	}
	return checkNonNegative("known", int64(x.GetKnown()))
}

// Validate checks a watch request.
func (x *WatchNodeRequest) Validate() error {
	return checkInstanceID("instance_id", x.GetInstanceId())
}

// Validate checks a release acknowledgement. An empty subset is allowed: it
// says the agent gives back nothing of the proposal.
func (x *AckReleaseRequest) Validate() error {
	if err := checkInstanceID("instance_id", x.GetInstanceId()); err != nil {
		return err
	}
	if id := x.GetReleaseId(); !releaseIDRe.MatchString(id) {
		if id == "" {
			return fieldErr("release_id", "required (the release_id of a proposal from WatchNode)")
		}
		return fieldErr("release_id", "%s is not a release ID", quote(id))
	}
	if err := checkAddrList("addresses", x.GetAddresses(), nil); err != nil {
		return err
	}
	return checkPrefixList("prefixes", x.GetPrefixes())
}

// Validate checks a heartbeat.
func (x *HeartbeatRequest) Validate() error {
	return checkInstanceID("instance_id", x.GetInstanceId())
}

// Validate checks a budget lookup.
func (x *GetSubnetBudgetRequest) Validate() error {
	return checkSubnetID("subnet_id", x.GetSubnetId())
}

// Validate accepts every list request; it has no fields.
func (x *ListSubnetBudgetsRequest) Validate() error { return nil }

// Validate accepts every watch request; it has no fields.
func (x *WatchSubnetBudgetsRequest) Validate() error { return nil }

// Validate checks a budget change: counts are non-negative.
func (x *SetSubnetBudgetRequest) Validate() error {
	if err := checkSubnetID("subnet_id", x.GetSubnetId()); err != nil {
		return err
	}
	if err := checkNonNegative("headroom", x.GetHeadroom()); err != nil {
		return err
	}
	return checkNonNegative("cap", x.GetCap())
}

// Validate accepts every node list request; it has no fields.
func (x *ListNodesRequest) Validate() error { return nil }

// Validate checks the optional node filter.
func (x *ListENIsRequest) Validate() error {
	if x.GetInstanceId() == "" {
		return nil
	}
	return checkInstanceID("instance_id", x.GetInstanceId())
}

// Validate accepts every status request; it has no fields.
func (x *GetStatusRequest) Validate() error { return nil }

// Validate checks the record bound: 0 (all kept) to 100000.
func (x *GetLogsRequest) Validate() error {
	if n := x.GetMaxRecords(); n < 0 || n > 100000 {
		return fmt.Errorf("max_records %d: want 0 (every record kept) to 100000", n)
	}
	return nil
}

// Validate checks the staleness threshold: at most a week, never negative.
func (x *CheckRequest) Validate() error {
	if s := x.GetStaleAfterSeconds(); s < 0 || s > 7*24*3600 {
		return fmt.Errorf("stale_after_seconds %d: want 0 (the default) to 604800", s)
	}
	return nil
}
