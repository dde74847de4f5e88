package hostnet

import (
	"errors"
	"net/netip"
	"testing"
)

func validPod() PodConfig {
	return PodConfig{
		Attachment:  Attachment{Network: "allot", ContainerID: "abc123", IfName: "eth0"},
		NetNS:       "/var/run/netns/cni-1",
		Address:     netip.MustParseAddr("10.0.1.20"),
		DeviceIndex: 1,
	}
}

func TestPodConfigValidate(t *testing.T) {
	if err := validPod().Validate(); err != nil {
		t.Fatalf("valid pod: %v", err)
	}
	for name, mutate := range map[string]func(*PodConfig){
		"empty network":       func(c *PodConfig) { c.Attachment.Network = "" },
		"slash in network":    func(c *PodConfig) { c.Attachment.Network = "a/b" },
		"empty container ID":  func(c *PodConfig) { c.Attachment.ContainerID = "" },
		"space in container":  func(c *PodConfig) { c.Attachment.ContainerID = "a b" },
		"empty ifname":        func(c *PodConfig) { c.Attachment.IfName = "" },
		"ifname too long":     func(c *PodConfig) { c.Attachment.IfName = "eth0123456789012" },
		"ifname with colon":   func(c *PodConfig) { c.Attachment.IfName = "eth0:1" },
		"ifname dot":          func(c *PodConfig) { c.Attachment.IfName = "." },
		"relative netns":      func(c *PodConfig) { c.NetNS = "netns/x" },
		"empty netns":         func(c *PodConfig) { c.NetNS = "" },
		"no address":          func(c *PodConfig) { c.Address = netip.Addr{} },
		"IPv6 address":        func(c *PodConfig) { c.Address = netip.MustParseAddr("fd00::1") },
		"link-local address":  func(c *PodConfig) { c.Address = netip.MustParseAddr("169.254.1.1") },
		"loopback address":    func(c *PodConfig) { c.Address = netip.MustParseAddr("127.0.0.2") },
		"negative device":     func(c *PodConfig) { c.DeviceIndex = -1 },
		"device out of range": func(c *PodConfig) { c.DeviceIndex = MaxDeviceIndex + 1 },
		"mtu too small":       func(c *PodConfig) { c.MTU = 100 },
		"mtu too large":       func(c *PodConfig) { c.MTU = 9002 },
	} {
		c := validPod()
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestTeardownNeedsOnlyTheAttachment(t *testing.T) {
	c := PodConfig{Attachment: validPod().Attachment}
	if err := c.ValidateForTeardown(); err != nil {
		t.Errorf("teardown without netns or address: %v", err)
	}
	c.Attachment.IfName = ""
	if err := c.ValidateForTeardown(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("teardown without ifname: %v, want ErrInvalidConfig", err)
	}
}

func TestENIConfigValidate(t *testing.T) {
	ok := []ENIConfig{
		{MAC: "02:00:00:00:00:01", DeviceIndex: 0},
		{MAC: "02:00:00:00:00:01", DeviceIndex: 0, PrimaryIP: netip.MustParseAddr("10.0.0.5"), Subnet: netip.MustParsePrefix("10.0.0.0/24")},
		{MAC: "02:00:00:00:00:02", DeviceIndex: 3, PrimaryIP: netip.MustParseAddr("10.0.1.5"), Subnet: netip.MustParsePrefix("10.0.1.0/24"), MTU: 9001},
	}
	for _, c := range ok {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	bad := map[string]ENIConfig{
		"bad MAC":            {MAC: "zz", DeviceIndex: 0},
		"8-byte MAC":         {MAC: "02:00:00:00:00:00:00:01", DeviceIndex: 0},
		"secondary, no IP":   {MAC: "02:00:00:00:00:02", DeviceIndex: 1, Subnet: netip.MustParsePrefix("10.0.1.0/24")},
		"secondary, no CIDR": {MAC: "02:00:00:00:00:02", DeviceIndex: 1, PrimaryIP: netip.MustParseAddr("10.0.1.5")},
		"IP outside subnet":  {MAC: "02:00:00:00:00:02", DeviceIndex: 1, PrimaryIP: netip.MustParseAddr("10.0.2.5"), Subnet: netip.MustParsePrefix("10.0.1.0/24")},
		"subnet /31":         {MAC: "02:00:00:00:00:02", DeviceIndex: 1, PrimaryIP: netip.MustParseAddr("10.0.1.0"), Subnet: netip.MustParsePrefix("10.0.1.0/31")},
		"bad device index":   {MAC: "02:00:00:00:00:02", DeviceIndex: 500},
	}
	for name, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestSNATConfigValidate(t *testing.T) {
	good := SNATConfig{PrimaryMAC: "02:00:00:00:00:01", PrimaryIP: netip.MustParseAddr("10.0.0.10"),
		VPCCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good: %v", err)
	}
	if err := (SNATConfig{External: true}).Validate(); err != nil {
		t.Errorf("external needs nothing else: %v", err)
	}
	for name, mutate := range map[string]func(*SNATConfig){
		"no MAC":       func(c *SNATConfig) { c.PrimaryMAC = "" },
		"no IP":        func(c *SNATConfig) { c.PrimaryIP = netip.Addr{} },
		"no VPC CIDR":  func(c *SNATConfig) { c.VPCCIDRs = nil },
		"IPv6 exclude": func(c *SNATConfig) { c.ExcludeCIDRs = []netip.Prefix{netip.MustParsePrefix("fd00::/8")} },
		"invalid CIDR": func(c *SNATConfig) { c.VPCCIDRs = []netip.Prefix{{}} },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidConfig", name, err)
		}
	}
}
