package hostnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
)

// ErrInvalidConfig is wrapped by every argument validation error, from Linux
// and Recorder alike.
var ErrInvalidConfig = errors.New("invalid host network config")

// MaxDeviceIndex bounds ENI device indexes (the largest instance types
// attach fewer than this many ENIs).
const MaxDeviceIndex = 127

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
}

// Validate checks the attachment the way CNI constrains it.
func (a Attachment) Validate() error {
	if !validCNIName(a.Network) {
		return invalid("network name %q must be non-empty letters, digits, '_', '-' or '.'", a.Network)
	}
	if !validCNIName(a.ContainerID) {
		return invalid("container ID %q must be non-empty letters, digits, '_', '-' or '.'", a.ContainerID)
	}
	if a.IfName == "" || len(a.IfName) > 15 || a.IfName == "." || a.IfName == ".." ||
		strings.ContainsAny(a.IfName, "/: \t\n") {
		return invalid("interface name %q must be 1-15 characters without '/', ':' or spaces", a.IfName)
	}
	return nil
}

func validCNIName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

func validMTU(mtu int) error {
	if mtu != 0 && (mtu < 576 || mtu > 9001) {
		return invalid("mtu %d must be 0 (leave as is) or within 576-9001", mtu)
	}
	return nil
}

func validDeviceIndex(i int) error {
	if i < 0 || i > MaxDeviceIndex {
		return invalid("device index %d must be within 0-%d", i, MaxDeviceIndex)
	}
	return nil
}

func parseMAC(s string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, invalid("MAC %q is not an Ethernet address", s)
	}
	return mac, nil
}

// Validate checks an ENI description.
func (c ENIConfig) Validate() error {
	if _, err := parseMAC(c.MAC); err != nil {
		return err
	}
	if err := validDeviceIndex(c.DeviceIndex); err != nil {
		return err
	}
	if err := validMTU(c.MTU); err != nil {
		return err
	}
	if c.DeviceIndex == 0 && !c.PrimaryIP.IsValid() {
		return nil
	}
	if !c.PrimaryIP.Is4() {
		return invalid("ENI %s: primary IP %v must be an IPv4 address", c.MAC, c.PrimaryIP)
	}
	if !c.Subnet.IsValid() || !c.Subnet.Addr().Is4() || c.Subnet.Bits() > 30 {
		return invalid("ENI %s: subnet %v must be an IPv4 CIDR of /30 or wider", c.MAC, c.Subnet)
	}
	if !c.Subnet.Contains(c.PrimaryIP) {
		return invalid("ENI %s: primary IP %v is outside subnet %v", c.MAC, c.PrimaryIP, c.Subnet)
	}
	return nil
}

// Validate checks a pod description.
func (c PodConfig) Validate() error {
	if err := c.Attachment.Validate(); err != nil {
		return err
	}
	if c.NetNS == "" || !filepath.IsAbs(c.NetNS) {
		return invalid("%v: netns path %q must be absolute", c.Attachment, c.NetNS)
	}
	if err := validPodAddress(c.Address); err != nil {
		return fmt.Errorf("%v: %w", c.Attachment, err)
	}
	if err := validDeviceIndex(c.DeviceIndex); err != nil {
		return err
	}
	return validMTU(c.MTU)
}

// ValidateForTeardown checks only what TeardownPod needs: it must work for a
// pod whose namespace is long gone.
func (c PodConfig) ValidateForTeardown() error {
	if err := c.Attachment.Validate(); err != nil {
		return err
	}
	if c.Address.IsValid() {
		if err := validPodAddress(c.Address); err != nil {
			return err
		}
	}
	return validDeviceIndex(c.DeviceIndex)
}

func validPodAddress(a netip.Addr) error {
	if !a.Is4() || a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() ||
		a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return invalid("pod address %v must be a unicast IPv4 address", a)
	}
	return nil
}

// Validate checks a SNAT description. With External set nothing else is
// needed.
func (c SNATConfig) Validate() error {
	if c.External {
		return nil
	}
	if _, err := parseMAC(c.PrimaryMAC); err != nil {
		return err
	}
	if !c.PrimaryIP.Is4() {
		return invalid("SNAT primary IP %v must be an IPv4 address", c.PrimaryIP)
	}
	if len(c.VPCCIDRs) == 0 {
		return invalid("SNAT needs at least one VPC CIDR")
	}
	for _, p := range append(append([]netip.Prefix{}, c.VPCCIDRs...), c.ExcludeCIDRs...) {
		if !p.IsValid() || !p.Addr().Is4() {
			return invalid("SNAT CIDR %v must be an IPv4 CIDR", p)
		}
	}
	return nil
}
