package world

import (
	"maps"
	"slices"
)

// InstanceType is what DescribeInstanceTypes tells about one type: its size
// and the ENI limits that bound how many addresses a node can hold.
type InstanceType struct {
	Name      string `json:"name"`
	VCPUs     int    `json:"vcpus"`
	MemoryMiB int    `json:"memoryMiB"`
	// MaxENIs is the most network interfaces attached at once, primary included.
	MaxENIs int `json:"maxENIs"`
	// IPv4PerENI is the address slots of one interface, primary included; a
	// /28 prefix takes one slot.
	IPv4PerENI int `json:"ipv4PerENI"`
	// Nitro types accept /28 IPv4 prefixes; Xen types do not.
	Nitro              bool   `json:"nitro"`
	NetworkPerformance string `json:"networkPerformance,omitempty"`
}

// Hypervisor returns "nitro" or "xen".
func (t InstanceType) Hypervisor() string {
	if t.Nitro {
		return "nitro"
	}
	return "xen"
}

// maxSlotsAnyType bounds the addresses of an ENI that is not attached: the
// largest IPv4PerENI of any type. EC2 checks the real limit on attach.
const maxSlotsAnyType = 50

// DefaultInstanceTypes returns the built-in catalog, keyed by name. The ENI
// limits are EC2's published ones.
func DefaultInstanceTypes() map[string]InstanceType {
	list := []InstanceType{
		{"t2.medium", 2, 4096, 3, 6, false, "Low to Moderate"},
		{"t3.small", 2, 2048, 3, 4, true, "Up to 5 Gigabit"},
		{"t3.medium", 2, 4096, 3, 6, true, "Up to 5 Gigabit"},
		{"t3.large", 2, 8192, 3, 12, true, "Up to 5 Gigabit"},
		{"m4.large", 2, 8192, 2, 10, false, "Moderate"},
		{"m5.large", 2, 8192, 3, 10, true, "Up to 10 Gigabit"},
		{"m5.xlarge", 4, 16384, 4, 15, true, "Up to 10 Gigabit"},
		{"m5.2xlarge", 8, 32768, 4, 15, true, "Up to 10 Gigabit"},
		{"m5.4xlarge", 16, 65536, 8, 30, true, "Up to 10 Gigabit"},
		{"m5.24xlarge", 96, 393216, 15, 50, true, "25 Gigabit"},
		{"m6i.large", 2, 8192, 3, 10, true, "Up to 12.5 Gigabit"},
		{"m6i.xlarge", 4, 16384, 4, 15, true, "Up to 12.5 Gigabit"},
		{"c5.large", 2, 4096, 3, 10, true, "Up to 10 Gigabit"},
		{"c5.xlarge", 4, 8192, 4, 15, true, "Up to 10 Gigabit"},
		{"c5.2xlarge", 8, 16384, 4, 15, true, "Up to 10 Gigabit"},
		{"c5.4xlarge", 16, 32768, 8, 30, true, "Up to 10 Gigabit"},
		{"r5.large", 2, 16384, 3, 10, true, "Up to 10 Gigabit"},
		{"r5.xlarge", 4, 32768, 4, 15, true, "Up to 10 Gigabit"},
		{"r5.2xlarge", 8, 65536, 4, 15, true, "Up to 10 Gigabit"},
	}
	m := make(map[string]InstanceType, len(list))
	for _, t := range list {
		m[t.Name] = t
	}
	return m
}

// InstanceTypes returns the catalog sorted by name.
func (w *World) InstanceTypes() []InstanceType {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.SortedFunc(maps.Values(w.types), func(a, b InstanceType) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
}

// SetInstanceType adds or replaces a catalog entry.
func (w *World) SetInstanceType(t InstanceType) error {
	if t.Name == "" || t.MaxENIs < 1 || t.IPv4PerENI < 1 || t.IPv4PerENI > maxSlotsAnyType {
		return errorf(CodeInvalidParameterValue, "instance type %q: name, maxENIs >= 1 and 1 <= ipv4PerENI <= %d are required", t.Name, maxSlotsAnyType)
	}
	w.mu.Lock()
	w.types[t.Name] = t
	w.mu.Unlock()
	return nil
}
