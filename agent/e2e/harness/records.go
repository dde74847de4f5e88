package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/introspect"
)

// Records are the attachments one source of truth knows, keyed
// "network/containerID/ifname", with the address each holds.
type Records map[string]netip.Addr

// Key renders an attachment key as Records use it.
func Key(network string, p *Pod) string {
	return network + "/" + p.RT.ContainerID + "/" + p.RT.IfName
}

// CheckpointRecords are the allocations in a checkpoint.
func CheckpointRecords(st checkpoint.State) Records {
	r := Records{}
	for _, a := range st.Allocations {
		r[a.Network+"/"+a.ContainerID+"/"+a.IfName] = a.Addr
	}
	return r
}

// Pods reads the agent's /v1/pods.
func (a *Agent) Pods(ctx context.Context) ([]introspect.Pod, error) {
	b, err := a.Get(ctx, "/v1/pods")
	if err != nil {
		return nil, err
	}
	var pods []introspect.Pod
	if err := json.Unmarshal(b, &pods); err != nil {
		return nil, fmt.Errorf("decode /v1/pods: %w", err)
	}
	return pods, nil
}

// IntrospectRecords are the pods /v1/pods lists.
func IntrospectRecords(pods []introspect.Pod) (Records, error) {
	r := Records{}
	for _, p := range pods {
		a, err := netip.ParseAddr(p.Addr)
		if err != nil {
			return nil, fmt.Errorf("/v1/pods: %s/%s/%s has address %q: %w", p.Network, p.ContainerID, p.IfName, p.Addr, err)
		}
		r[p.Network+"/"+p.ContainerID+"/"+p.IfName] = a
	}
	return r, nil
}

// vethAlias starts the alias the agent stamps on each host veth
// (agent/hostnet); the rest is the attachment key.
const vethAlias = "allot/"

// HostRecords reads the attachments off the node: each host veth's alias
// names its attachment, its /32 route the address. A veth without a
// readable alias, or without exactly one route, is reported under
// "?<veth name>" with whatever address it routes (invalid if none), so it
// can never match a record.
func HostRecords(h HostSide) Records {
	r := Records{}
	for name, v := range h.Veths {
		key, ok := strings.CutPrefix(v.Alias, vethAlias)
		var addr netip.Addr
		if len(v.Routes) > 0 {
			addr = v.Routes[0]
		}
		if !ok || len(v.Routes) != 1 {
			key = "?" + name
		}
		r[key] = addr
	}
	return r
}

// Diff lists every disagreement between two sources, named for messages.
func Diff(aName string, a Records, bName string, b Records) []string {
	var out []string
	for k, av := range a {
		bv, ok := b[k]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s has %s = %s, %s has nothing", aName, k, av, bName))
		case av != bv:
			out = append(out, fmt.Sprintf("%s has %s = %s, %s has %s", aName, k, av, bName, bv))
		}
	}
	for k, bv := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("%s has %s = %s, %s has nothing", bName, k, bv, aName))
		}
	}
	slices.Sort(out)
	return out
}

// Duplicates lists addresses held by more than one attachment.
func (r Records) Duplicates() []string {
	by := map[netip.Addr][]string{}
	for k, a := range r {
		by[a] = append(by[a], k)
	}
	var out []string
	for a, ks := range by {
		if len(ks) > 1 {
			slices.Sort(ks)
			out = append(out, fmt.Sprintf("%s held by %v", a, ks))
		}
	}
	slices.Sort(out)
	return out
}
