package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// ctxFor bounds one test's calls.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// resultAddr is the pod's address from an ADD result, which must be one
// IPv4 /32.
func resultAddr(t *testing.T, res *current.Result) netip.Addr {
	t.Helper()
	if len(res.IPs) != 1 {
		t.Fatalf("result has %d IPs, want 1: %v", len(res.IPs), res)
	}
	p, ok := netip.AddrFromSlice(res.IPs[0].Address.IP)
	if ones, bits := res.IPs[0].Address.Mask.Size(); !ok || ones != 32 || bits != 32 {
		t.Fatalf("result address %v is not a /32", res.IPs[0].Address)
	}
	return p.Unmap()
}

// addrOf is resultAddr for goroutines: it returns the error.
func addrOf(res *current.Result) (netip.Addr, error) {
	if len(res.IPs) != 1 {
		return netip.Addr{}, fmt.Errorf("result has %d IPs, want 1: %v", len(res.IPs), res)
	}
	a, ok := netip.AddrFromSlice(res.IPs[0].Address.IP)
	if ones, bits := res.IPs[0].Address.Mask.Size(); !ok || ones != 32 || bits != 32 {
		return netip.Addr{}, fmt.Errorf("result address %v is not a /32", res.IPs[0].Address)
	}
	return a.Unmap(), nil
}

// addAll runs ADD for every pod, at most parallel at once (a runtime starts
// pods concurrently), and returns each pod's address.
func addAll(t *testing.T, ctx context.Context, rt *harness.Runtime, pods []*harness.Pod, parallel int) map[*harness.Pod]netip.Addr {
	t.Helper()
	out := map[*harness.Pod]netip.Addr{}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			res, err := rt.Add(ctx, p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				return
			}
			a, err := addrOf(res)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				return
			}
			out[p] = a
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	return out
}

// verifyWired checks every pod's network on both sides against its address
// and the ENI EC2 says owns it, and pings each pod from the node.
func verifyWired(t *testing.T, env *harness.Env, addrs map[*harness.Pod]netip.Addr) {
	t.Helper()
	host, err := harness.InspectHost(env.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	for p, a := range addrs {
		_, dev, ok := env.Cloud.OwnerOf(a)
		if !ok {
			t.Errorf("%s got %s, which EC2 has not assigned to any ENI of the node", p, a)
			continue
		}
		for _, bad := range harness.VerifyWired(host, harness.Wired{Network: harness.Network, Pod: p, Addr: a, DeviceIndex: dev}) {
			t.Errorf("%s (%s, device %d): %s", p, a, dev, bad)
		}
		if err := harness.Ping(env.Node.NS, a, 2); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		// Out through the VPC: the subnet gateway (in the vpc namespace)
		// answers only if the packet left through the ENI that owns the
		// address, so this proves the pod's source rule and ENI table.
		if err := harness.Ping(p.NS, harness.SubnetGateway, 2); err != nil {
			t.Errorf("%s (%s on device %d) cannot reach the VPC: %v", p, a, dev, err)
		}
		// The node side resolved the pod by ARP, to the pod's interface.
		ps, err := harness.InspectPod(p)
		if err != nil {
			t.Fatal(err)
		}
		mac, state, err := harness.HostNeighbour(env.Node.NS, harness.HostVethName(harness.Network, p), a)
		if err != nil || mac != ps.MAC {
			t.Errorf("%s: node's neighbour entry for %s is %q (state %#x, err %v), want the pod's %s", p, a, mac, state, err, ps.MAC)
		}
	}
}

// distinct fails unless every pod has its own address.
func distinct(t *testing.T, addrs map[*harness.Pod]netip.Addr) {
	t.Helper()
	seen := map[netip.Addr]*harness.Pod{}
	for p, a := range addrs {
		if q, dup := seen[a]; dup {
			t.Errorf("%s and %s both got %s", p, q, a)
		}
		seen[a] = p
	}
}

// agreement compares the agent's checkpoint, its /v1/pods and the host
// (veths, their aliases and routes) and returns the checkpoint's records.
func agreement(t *testing.T, ctx context.Context, env *harness.Env) harness.Records {
	t.Helper()
	return agreementBut(t, ctx, env, nil)
}

// agreementBut is agreement, except that the host may also have the veths
// of the pods in interrupted (ADDs a kill cut short after they wired the
// pod but before its record was durable), and rules for the addresses
// those veths route.
func agreementBut(t *testing.T, ctx context.Context, env *harness.Env, interrupted []*harness.Pod) harness.Records {
	t.Helper()
	waitTornDown(t, env)
	st, err := env.Agent.Checkpoint()
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	ckpt := harness.CheckpointRecords(st)
	pods, err := env.Agent.Pods(ctx)
	if err != nil {
		t.Fatalf("/v1/pods: %v", err)
	}
	intro, err := harness.IntrospectRecords(pods)
	if err != nil {
		t.Fatal(err)
	}
	h, err := harness.InspectHost(env.Node.NS)
	if err != nil {
		t.Fatal(err)
	}
	host := harness.HostRecords(h)
	strayAddrs := map[netip.Addr]bool{}
	for _, p := range interrupted {
		name := harness.HostVethName(harness.Network, p)
		if _, recorded := ckpt[harness.Key(harness.Network, p)]; recorded {
			continue
		}
		if v, ok := h.Veths[name]; ok {
			for _, a := range v.Routes {
				strayAddrs[a] = true
			}
		}
		delete(host, harness.Key(harness.Network, p))
		delete(host, "?"+name)
	}
	for _, d := range harness.Diff("checkpoint", ckpt, "/v1/pods", intro) {
		t.Error(d)
	}
	for _, d := range harness.Diff("checkpoint", ckpt, "host", host) {
		t.Error(d)
	}
	for _, d := range ckpt.Duplicates() {
		t.Errorf("checkpoint: %s", d)
	}
	for a, to := range h.ToPod {
		if !contains(ckpt, a) && !strayAddrs[a] {
			t.Errorf("host has rule to %s (table %d) that no record holds", a, to)
		}
	}
	for a, tbl := range h.FromPod {
		if !contains(ckpt, a) && !strayAddrs[a] {
			t.Errorf("host has rule from %s (table %d) that no record holds", a, tbl)
		}
	}
	return ckpt
}

func contains(r harness.Records, a netip.Addr) bool {
	for _, v := range r {
		if v == a {
			return true
		}
	}
	return false
}

// cniCode returns the CNI error code in err (0 if err is not a CNI error).
func cniCode(err error) uint {
	var te *types.Error
	if errors.As(err, &te) {
		return te.Code
	}
	return 0
}

// newPods creates n pod sandboxes named prefix-i in namespace "e2e".
func newPods(t *testing.T, prefix string, n int) []*harness.Pod {
	out := make([]*harness.Pod, n)
	for i := range out {
		out[i] = harness.NewPod(t, "e2e", prefix+"-"+strconv.Itoa(i))
	}
	return out
}

// waitTornDown waits (up to 15 s) until the node has no veth or rule that
// the checkpoint's records don't account for: the agent answers a DEL once
// the release is recorded and removes the pod's host pieces just after.
// On time-out it returns, and the caller's checks report what is left.
func waitTornDown(t *testing.T, env *harness.Env) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := env.Agent.Checkpoint()
		if err != nil {
			return
		}
		h, err := harness.InspectHost(env.Node.NS)
		if err != nil {
			return
		}
		ckpt := harness.CheckpointRecords(st)
		done := true
		for k := range harness.HostRecords(h) {
			if _, ok := ckpt[k]; !ok {
				done = false
			}
		}
		for a := range h.ToPod {
			done = done && contains(ckpt, a)
		}
		for a := range h.FromPod {
			done = done && contains(ckpt, a)
		}
		if done || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
