package hostnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
)

// VethPrefix starts the name of every host-side veth this package creates;
// Reconcile treats links with it as ours.
const VethPrefix = "alt"

// PodGateway is the pod's next hop. It exists nowhere: the pod reaches it
// through a permanent neighbour entry pointing at the host veth's MAC, so
// every packet the pod sends lands on the host, which routes it.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// Rule priorities. They follow aws-vpc-cni's so that operators reading
// `ip rule` on a node see familiar numbers; Reconcile owns the per-pod ones
// (PriorityToPod, PriorityFromPod) and SetupSNAT the two in between.
const (
	// PriorityToPod: `to <pod> lookup main`, so traffic to a pod reaches its
	// veth whatever source rule would otherwise apply.
	PriorityToPod = 512
	// PriorityVPCGoto: `to <VPC or excluded CIDR> goto PriorityFromPod`, so
	// in-VPC traffic skips the next rule and keeps its ENI.
	PriorityVPCGoto = 1024
	// PriorityNonVPCMain: `lookup main` for what is left (leaving the VPC),
	// so it goes out of the primary interface where it is translated.
	PriorityNonVPCMain = 1025
	// PriorityFromPod: `from <pod> lookup <ENI table>` for pods on
	// secondary ENIs.
	PriorityFromPod = 1536
)

// mainTable is the kernel's main route table (RT_TABLE_MAIN).
const mainTable = 254

// aliasPrefix starts the alias stamped on every host veth; the alias carries
// the attachment so a stray device can be reported by what it belonged to.
const aliasPrefix = "allot/"

// HostVethName is the host-side veth name for an attachment: the prefix and
// 11 hex digits of a hash of the attachment (14 characters, within the
// kernel's 15). Deriving it from the whole CNI attachment, never the pod
// name, means a new sandbox of a same-named pod can never collide with, or be
// torn down by, an old one.
func HostVethName(a Attachment) string {
	h := sha256.Sum256([]byte(a.Network + "\x00" + a.ContainerID + "\x00" + a.IfName))
	return VethPrefix + hex.EncodeToString(h[:])[:11]
}

// RouteTable is the route table of the ENI at a device index: device index +
// 1, as aws-vpc-cni numbers them. The primary ENI (index 0) uses main.
func RouteTable(deviceIndex int) int {
	if deviceIndex == 0 {
		return mainTable
	}
	return deviceIndex + 1
}

// SubnetGateway is the VPC router's address in a subnet: the first address
// after the network address.
func SubnetGateway(subnet netip.Prefix) netip.Addr {
	return subnet.Masked().Addr().Next()
}

// String renders the attachment for logs and errors.
func (a Attachment) String() string {
	return fmt.Sprintf("%s/%s/%s", a.Network, a.ContainerID, a.IfName)
}

// alias is the attachment as stamped on the host veth.
func (a Attachment) alias() string {
	return aliasPrefix + a.String()
}

// parseAlias reads an attachment back from a host veth alias.
func parseAlias(s string) (Attachment, bool) {
	rest, ok := strings.CutPrefix(s, aliasPrefix)
	if !ok {
		return Attachment{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return Attachment{}, false
	}
	a := Attachment{Network: parts[0], ContainerID: parts[1], IfName: parts[2]}
	if a.Validate() != nil {
		return Attachment{}, false
	}
	return a, true
}
