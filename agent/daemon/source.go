package daemon

import (
	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/introspect"
	"github.com/allotnet/allot/internal/buildinfo"
)

// source adapts the agent to what introspection reads.
type source struct{ a *Agent }

var _ introspect.Source = source{}

func (a *Agent) source() introspect.Source { return source{a} }

// ENIs lists the pool's ENIs with every address, its state and holder.
func (s source) ENIs() []introspect.ENI {
	out := []introspect.ENI{}
	if !s.a.ready.Load() {
		return out
	}
	st := s.a.pool.Snapshot()
	holder := map[string]string{}
	for _, al := range st.Allocations {
		holder[al.Addr.String()] = al.Network + "/" + al.ContainerID + "/" + al.IfName
	}
	byID := map[string]int{}
	for _, e := range st.ENIs {
		ie := introspect.ENI{ID: e.ID, MAC: e.MAC, DeviceIndex: e.DeviceIndex, Primary: e.Primary,
			SubnetID: e.SubnetID, Addresses: []introspect.Address{}}
		if e.SubnetCIDR.IsValid() {
			ie.SubnetCIDR = e.SubnetCIDR.String()
		}
		if e.PrimaryIP.IsValid() {
			ie.PrimaryIP = e.PrimaryIP.String()
		}
		byID[e.ID] = len(out)
		out = append(out, ie)
	}
	for _, ad := range st.Addresses {
		i, ok := byID[ad.ENIID]
		if !ok {
			continue
		}
		x := introspect.Address{Addr: ad.Addr.String(), State: string(ad.State), CoolUntil: ad.CoolUntil,
			ReleaseID: ad.ReleaseID}
		if ad.Prefix.IsValid() {
			x.Prefix = ad.Prefix.String()
		}
		if ad.State == checkpoint.Assigned {
			x.Attachment = holder[x.Addr]
		}
		out[i].Addresses = append(out[i].Addresses, x)
	}
	return out
}

// Pods lists every attachment holding an address.
func (s source) Pods() []introspect.Pod {
	out := []introspect.Pod{}
	if !s.a.ready.Load() {
		return out
	}
	for _, al := range s.a.pool.Allocations() {
		out = append(out, introspect.Pod{
			Network: al.Network, ContainerID: al.ContainerID, IfName: al.IfName, Addr: al.Addr.String(),
			ENIID: al.ENIID, HostVeth: al.HostVeth, Netns: al.Netns, PodNamespace: al.PodNamespace,
			PodName: al.PodName, Created: al.Created,
		})
	}
	return out
}

// Health reports readiness and the broker link.
func (s source) Health() introspect.Health {
	if !s.a.ready.Load() {
		return introspect.Health{Detail: "restoring state"}
	}
	bs := s.a.link.Status()
	return introspect.Health{Ready: true, BrokerConnected: bs.Connected, BrokerError: bs.LastError}
}

// RepairHost makes the host's pod devices match the records (allotctl
// check --repair): missing pieces of recorded pods restored, strays
// removed. The pool is not touched.
func (s source) RepairHost() introspect.RepairReport {
	out := introspect.RepairReport{Restored: []string{}}
	if !s.a.ready.Load() {
		out.Error = "the agent is restoring its state"
		return out
	}
	rep, n, err := s.a.reconcileHost("repair")
	for _, r := range rep.Repaired {
		out.Restored = append(out.Restored, r.Attachment.String())
	}
	out.Removed = n
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

// About returns the build, the node and the agent's configuration.
func (s source) About() introspect.About {
	ab := introspect.About{Build: buildinfo.Get(), NodeName: s.a.cfg.NodeName, Config: s.a.cfg}
	if s.a.ready.Load() {
		ab.InstanceID, ab.InstanceType, ab.AvailabilityZone = s.a.ident.InstanceID, s.a.ident.InstanceType, s.a.ident.AvailabilityZone
	}
	return ab
}

// Logs returns the agent's latest log records, JSON lines, oldest first;
// nil when none are kept.
func (s source) Logs() []byte {
	if s.a.deps.RecentLogs == nil {
		return nil
	}
	return s.a.deps.RecentLogs.Lines()
}
