package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/introspect"
)

// Classes of what the node's check finds.
const (
	// ClassPodWithoutDevices: a recorded attachment whose host devices
	// (veth, routes, rules) are missing or wrong.
	ClassPodWithoutDevices = "pod-without-devices"
	// ClassPodNetNSGone: a recorded attachment whose network namespace is
	// gone; the runtime's DEL (or GC) will free it.
	ClassPodNetNSGone = "pod-netns-gone"
	// ClassDevicesWithoutPod: one of our host veths no record accounts for.
	ClassDevicesWithoutPod = "devices-without-pod"
)

// Check compares the agent's records with the host's devices and reports
// each disagreement; unlike GC it repairs and removes nothing. It holds
// the host network's write side briefly, so a pod being set up or torn
// down is not reported half-made.
func (s source) Check() introspect.CheckReport {
	a := s.a
	rep := introspect.CheckReport{Findings: []introspect.Finding{}}
	if !a.ready.Load() {
		rep.Error = "the agent is restoring its state"
		return rep
	}
	a.netMu.Lock()
	defer a.netMu.Unlock()
	desired := a.desiredPods()
	rep.Pods = len(desired)
	recorded := map[string]bool{}
	for _, c := range desired {
		recorded[hostnet.HostVethName(c.Attachment)] = true
		if f, bad := checkPod(a.net, c); bad {
			rep.Findings = append(rep.Findings, f)
		}
	}
	host, err := a.net.ListPods()
	if err != nil {
		rep.Error = fmt.Sprintf("list host devices: %v", err)
		return rep
	}
	rep.HostVeths = len(host)
	for _, p := range host {
		if recorded[p.HostVeth] {
			continue
		}
		addrs := make([]string, 0, len(p.Addresses))
		for _, ad := range p.Addresses {
			addrs = append(addrs, ad.String())
		}
		rep.Findings = append(rep.Findings, introspect.Finding{
			Class: ClassDevicesWithoutPod, HostVeth: p.HostVeth, Attachment: p.Attachment.String(),
			Addr: strings.Join(addrs, ","),
			Detail: fmt.Sprintf("host veth %s (routes to %s) belongs to no recorded attachment; the runtime's CNI GC removes it",
				p.HostVeth, strings.Join(addrs, ",")),
		})
	}
	return rep
}

func checkPod(net hostnet.Network, c hostnet.PodConfig) (introspect.Finding, bool) {
	f := introspect.Finding{Attachment: c.Attachment.String(), Addr: c.Address.String(),
		HostVeth: hostnet.HostVethName(c.Attachment)}
	err := net.CheckPod(c)
	var ce *hostnet.CheckError
	switch {
	case err == nil:
		return f, false
	case errors.Is(err, hostnet.ErrNetNSGone):
		f.Class, f.Detail = ClassPodNetNSGone, "the pod's network namespace "+c.NetNS+" is gone; its DEL has not come"
	case errors.As(err, &ce):
		f.Class, f.Detail = ClassPodWithoutDevices, "missing on the host: "+strings.Join(ce.Missing, "; ")
	default:
		f.Class, f.Detail = ClassPodWithoutDevices, err.Error()
	}
	return f, true
}
