// Package hostnettest holds a hostnet.Network that touches no kernel, for
// tests and the burst benchmark.
package hostnettest

import (
	"crypto/sha256"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/allotnet/allot/agent/hostnet"
)

// Op names a hostnet.Network method in a Recorder's log.
type Op string

// The operations a Recorder records.
const (
	OpSetupENI    Op = "SetupENI"
	OpSetupPod    Op = "SetupPod"
	OpTeardownPod Op = "TeardownPod"
	OpCheckPod    Op = "CheckPod"
	OpSetupSNAT   Op = "SetupSNAT"
	OpReconcile   Op = "Reconcile"
	OpRemoveStray Op = "RemoveStray"
	OpListPods    Op = "ListPods"
)

// Call is one recorded call and its outcome.
type Call struct {
	Op          Op
	Attachment  hostnet.Attachment
	Address     netip.Addr
	DeviceIndex int
	Err         error
}

// Recorder is a hostnet.Network that touches no kernel. It validates every argument
// exactly as Linux does, keeps the state Linux would build (ENIs, pods,
// which address belongs to which attachment, SNAT), and enforces the
// ordering Linux depends on: a pod on a secondary ENI needs that ENI set up
// first, and its address must lie in the ENI's subnet. It is what the burst
// benchmark runs instead of netlink, so a sloppy agent fails there too.
// Safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	enis   map[int]hostnet.ENIConfig
	pods   map[hostnet.Attachment]hostnet.PodConfig
	owner  map[netip.Addr]hostnet.Attachment
	snat   *hostnet.SNATConfig
	calls  []Call
	counts map[Op]int
	faults map[Op][]error
}

var _ hostnet.Network = (*Recorder)(nil)

// NewRecorder returns an empty Recorder: no ENI, no pod, no SNAT.
func NewRecorder() *Recorder {
	return &Recorder{
		enis:   map[int]hostnet.ENIConfig{},
		pods:   map[hostnet.Attachment]hostnet.PodConfig{},
		owner:  map[netip.Addr]hostnet.Attachment{},
		counts: map[Op]int{},
		faults: map[Op][]error{},
	}
}

// FailNext makes the next call of op fail with err, after validation, and
// without changing state. Queued faults are used in order.
func (r *Recorder) FailNext(op Op, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[op] = append(r.faults[op], err)
}

// Calls returns a copy of the call log.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Count returns how many times op was called.
func (r *Recorder) Count(op Op) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[op]
}

// Failures returns the calls that returned an error.
func (r *Recorder) Failures() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Call
	for _, c := range r.calls {
		if c.Err != nil {
			out = append(out, c)
		}
	}
	return out
}

// Pods returns the pods currently wired, ordered by address.
func (r *Recorder) Pods() []hostnet.PodConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]hostnet.PodConfig, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b hostnet.PodConfig) int { return a.Address.Compare(b.Address) })
	return out
}

// SNAT returns the last SNAT configuration applied, if any.
func (r *Recorder) SNAT() (hostnet.SNATConfig, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snat == nil {
		return hostnet.SNATConfig{}, false
	}
	return *r.snat, true
}

// record logs a call; the caller holds mu.
func (r *Recorder) record(c Call) error {
	r.calls = append(r.calls, c)
	r.counts[c.Op]++
	return c.Err
}

// fault pops an injected fault for op; the caller holds mu.
func (r *Recorder) fault(op Op) error {
	q := r.faults[op]
	if len(q) == 0 {
		return nil
	}
	r.faults[op] = q[1:]
	return q[0]
}

// SetupENI validates and records the ENI. An ENI at the same device index
// or with the same MAC is replaced, as Linux rebuilds the table.
func (r *Recorder) SetupENI(c hostnet.ENIConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpSetupENI, Address: c.PrimaryIP, DeviceIndex: c.DeviceIndex}
	if call.Err = c.Validate(); call.Err == nil {
		call.Err = r.fault(OpSetupENI)
	}
	if call.Err == nil {
		mac, _ := net.ParseMAC(c.MAC)
		for idx, e := range r.enis {
			if m, _ := net.ParseMAC(e.MAC); m.String() == mac.String() {
				delete(r.enis, idx)
			}
		}
		r.enis[c.DeviceIndex] = c
	}
	return r.record(call)
}

// SetupPod validates the pod against the recorded ENIs and addresses.
func (r *Recorder) SetupPod(c hostnet.PodConfig) (hostnet.PodResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpSetupPod, Attachment: c.Attachment, Address: c.Address, DeviceIndex: c.DeviceIndex}
	if call.Err = r.admit(c); call.Err == nil {
		call.Err = r.fault(OpSetupPod)
	}
	if call.Err != nil {
		return hostnet.PodResult{}, r.record(call)
	}
	r.wire(c)
	r.record(call)
	return recordedResult(c), nil
}

// admit applies the checks Linux's SetupPod would fail on; the caller
// holds mu.
func (r *Recorder) admit(c hostnet.PodConfig) error {
	if err := c.Validate(); err != nil {
		return err
	}
	if other, ok := r.owner[c.Address]; ok && other != c.Attachment {
		return fmt.Errorf("setup pod %v: %w: %v via %s (%v)", c.Attachment, hostnet.ErrAddressInUse, c.Address,
			hostnet.HostVethName(other), other)
	}
	eni, ok := r.enis[c.DeviceIndex]
	if !ok && c.DeviceIndex > 0 {
		return fmt.Errorf("setup pod %v: ENI at device index %d has not been set up", c.Attachment, c.DeviceIndex)
	}
	if ok && eni.Subnet.IsValid() && !eni.Subnet.Contains(c.Address) {
		return fmt.Errorf("setup pod %v: address %v is outside subnet %v of the ENI at device index %d",
			c.Attachment, c.Address, eni.Subnet, c.DeviceIndex)
	}
	return nil
}

// wire records the pod, releasing the address of an earlier configuration
// of the same attachment; the caller holds mu.
func (r *Recorder) wire(c hostnet.PodConfig) {
	if old, ok := r.pods[c.Attachment]; ok && r.owner[old.Address] == c.Attachment {
		delete(r.owner, old.Address)
	}
	r.pods[c.Attachment] = c
	r.owner[c.Address] = c.Attachment
}

// recordedResult is a deterministic stand-in for the kernel's answer.
func recordedResult(c hostnet.PodConfig) hostnet.PodResult {
	return hostnet.PodResult{
		HostVeth:    hostnet.HostVethName(c.Attachment),
		HostVethMAC: fakeMAC("host", c.Attachment).String(),
		PodIfName:   c.Attachment.IfName,
		PodMAC:      fakeMAC("pod", c.Attachment).String(),
		Gateway:     hostnet.PodGateway,
	}
}

// fakeMAC derives a locally administered unicast MAC from the attachment.
func fakeMAC(side string, a hostnet.Attachment) net.HardwareAddr {
	h := sha256.Sum256([]byte(side + "\x00" + a.String()))
	mac := net.HardwareAddr(h[:6])
	mac[0] = mac[0]&0xfc | 0x02
	return mac
}

// TeardownPod forgets the attachment. The address is released only if this
// attachment still owns it, as Linux keeps rules of an address that has
// moved on.
func (r *Recorder) TeardownPod(c hostnet.PodConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpTeardownPod, Attachment: c.Attachment, Address: c.Address, DeviceIndex: c.DeviceIndex}
	if call.Err = c.ValidateForTeardown(); call.Err == nil {
		call.Err = r.fault(OpTeardownPod)
	}
	if call.Err == nil {
		if old, ok := r.pods[c.Attachment]; ok {
			if r.owner[old.Address] == c.Attachment {
				delete(r.owner, old.Address)
			}
			delete(r.pods, c.Attachment)
		}
	}
	return r.record(call)
}

// CheckPod compares the request with what was set up, naming differences
// in a *hostnet.CheckError as Linux does.
func (r *Recorder) CheckPod(c hostnet.PodConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpCheckPod, Attachment: c.Attachment, Address: c.Address, DeviceIndex: c.DeviceIndex}
	if call.Err = c.Validate(); call.Err == nil {
		call.Err = r.fault(OpCheckPod)
	}
	if call.Err == nil {
		var missing []string
		got, ok := r.pods[c.Attachment]
		switch {
		case !ok:
			missing = append(missing, "host veth "+hostnet.HostVethName(c.Attachment))
		default:
			if got.Address != c.Address {
				missing = append(missing, fmt.Sprintf("pod address %s/32 on %s (has %s)", c.Address, c.Attachment.IfName, got.Address))
			}
			if got.DeviceIndex != c.DeviceIndex && c.DeviceIndex > 0 {
				missing = append(missing, fmt.Sprintf("rule %d: from %s/32 lookup %d", hostnet.PriorityFromPod, c.Address, hostnet.RouteTable(c.DeviceIndex)))
			}
		}
		if len(missing) > 0 {
			call.Err = &hostnet.CheckError{Attachment: c.Attachment, Missing: missing}
		}
	}
	return r.record(call)
}

// SetupSNAT validates and records the SNAT configuration.
func (r *Recorder) SetupSNAT(c hostnet.SNATConfig) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpSetupSNAT, Address: c.PrimaryIP}
	if call.Err = c.Validate(); call.Err == nil {
		call.Err = r.fault(OpSetupSNAT)
	}
	if call.Err == nil {
		cp := c
		cp.VPCCIDRs = slices.Clone(c.VPCCIDRs)
		cp.ExcludeCIDRs = slices.Clone(c.ExcludeCIDRs)
		r.snat = &cp
	}
	return r.record(call)
}

// Reconcile wires desired pods that are not recorded (as Linux restores
// them) and reports recorded pods that are not desired as stray links.
func (r *Recorder) Reconcile(desired []hostnet.PodConfig) (hostnet.Report, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpReconcile}
	if call.Err = r.fault(OpReconcile); call.Err != nil {
		return hostnet.Report{}, r.record(call)
	}
	var rep hostnet.Report
	want := map[hostnet.Attachment]bool{}
	for _, c := range desired {
		want[c.Attachment] = true
		got, ok := r.pods[c.Attachment]
		if ok && got.Address == c.Address && got.DeviceIndex == c.DeviceIndex {
			continue
		}
		if err := r.admit(c); err != nil {
			rep.Failed = append(rep.Failed, hostnet.PodFailure{Attachment: c.Attachment, Err: err.Error()})
			continue
		}
		r.wire(c)
		rep.Repaired = append(rep.Repaired, hostnet.Repair{Attachment: c.Attachment,
			Missing: []string{"host veth " + hostnet.HostVethName(c.Attachment)}})
	}
	for a := range r.pods {
		if !want[a] {
			rep.StrayLinks = append(rep.StrayLinks, hostnet.StrayLink{Name: hostnet.HostVethName(a), Attachment: a})
		}
	}
	slices.SortFunc(rep.StrayLinks, func(x, y hostnet.StrayLink) int { return strings.Compare(x.Name, y.Name) })
	r.record(call)
	return rep, nil
}

// RemoveStray forgets the pods behind the report's stray links.
func (r *Recorder) RemoveStray(rep hostnet.Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpRemoveStray}
	if call.Err = r.fault(OpRemoveStray); call.Err != nil {
		return r.record(call)
	}
	stray := map[string]bool{}
	for _, s := range rep.StrayLinks {
		stray[s.Name] = true
	}
	for a, p := range r.pods {
		if stray[hostnet.HostVethName(a)] {
			if r.owner[p.Address] == a {
				delete(r.owner, p.Address)
			}
			delete(r.pods, a)
		}
	}
	return r.record(call)
}

// ListPods lists the recorded pods as Linux would find them on the host.
func (r *Recorder) ListPods() ([]hostnet.PodInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	call := Call{Op: OpListPods}
	if call.Err = r.fault(OpListPods); call.Err != nil {
		return nil, r.record(call)
	}
	out := make([]hostnet.PodInfo, 0, len(r.pods))
	for a, p := range r.pods {
		info := hostnet.PodInfo{
			HostVeth:    hostnet.HostVethName(a),
			HostVethMAC: fakeMAC("host", a).String(),
			Attachment:  a,
			Addresses:   []netip.Addr{p.Address},
		}
		if p.DeviceIndex > 0 {
			info.Tables = []int{hostnet.RouteTable(p.DeviceIndex)}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(x, y hostnet.PodInfo) int { return strings.Compare(x.HostVeth, y.HostVeth) })
	r.record(call)
	return out, nil
}
