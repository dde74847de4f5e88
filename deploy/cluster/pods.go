package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/internal/netnstest"
)

// Pod is one pod sandbox on a node: its network namespace, the runtime's
// CNI view of it, and once ADD succeeded its address.
type Pod struct {
	// Name is the Kubernetes-style name (default/<name>).
	Name string
	Node *Node
	// Addr is the address ADD returned.
	Addr netip.Addr
	// TimeToAddress is from the first ADD to the one that succeeded,
	// retries included.
	TimeToAddress time.Duration
	// Attempts is how many sandboxes ADD took (1 unless the agent said
	// "try again later").
	Attempts int

	ns *netnstest.NS
	rt *libcni.RuntimeConf

	mu       sync.Mutex
	listener net.Listener
}

// NetNS is the path of the pod's namespace (CNI_NETNS).
func (p *Pod) NetNS() string { return p.ns.Path }

// ContainerID is the sandbox's ID in the CNI attachment.
func (p *Pod) ContainerID() string { return p.rt.ContainerID }

func (p *Pod) String() string {
	return fmt.Sprintf("%s on %s (%s)", p.Name, p.Node.Name, p.Addr)
}

// NewPod creates a pod sandbox on the node: a fresh namespace named under
// the run's prefix and a runtime config with a random container ID, as
// containerd makes them. It does not call ADD.
func (c *Cluster) NewPod(n *Node, name string) (*Pod, error) {
	c.mu.Lock()
	c.podSeq++
	nsName := fmt.Sprintf("%s%s%d", c.Prefix, podInfix, c.podSeq)
	c.mu.Unlock()
	ns, err := netnstest.Create(nsName)
	if err != nil {
		return nil, err
	}
	p := &Pod{Name: name, Node: n, ns: ns}
	p.rt = sandbox(ns.Path, name)
	c.mu.Lock()
	c.pods[p] = true
	c.mu.Unlock()
	return p, nil
}

// sandbox is the runtime config of a new sandbox of the pod.
func sandbox(nsPath, name string) *libcni.RuntimeConf {
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	cid := hex.EncodeToString(id)
	return &libcni.RuntimeConf{
		ContainerID: cid,
		NetNS:       nsPath,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", "default"},
			{"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", cid},
			{"K8S_POD_UID", "uid-" + cid[:12]},
		},
	}
}

// AddPod runs CNI ADD for the pod through libcni and the allot plugin
// binary, as a runtime does. When the agent answers "try again later"
// (code 11: its pool is empty and capacity is not there yet) the runtime
// tears the sandbox down with DEL and retries with a new one, as kubelet
// does, until ctx ends.
func (c *Cluster) AddPod(ctx context.Context, p *Pod) error {
	start := time.Now()
	for {
		p.Attempts++
		res, err := p.Node.cni.AddNetworkList(ctx, p.Node.list, p.rt)
		if err == nil {
			addr, perr := resultAddr(res)
			if perr != nil {
				return fmt.Errorf("ADD %s: %w", p.Name, perr)
			}
			p.Addr, p.TimeToAddress = addr, time.Since(start)
			return nil
		}
		var te *types.Error
		if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater {
			return fmt.Errorf("ADD %s on %s (attempt %d): %w", p.Name, p.Node.Name, p.Attempts, err)
		}
		if derr := p.Node.cni.DelNetworkList(ctx, p.Node.list, p.rt); derr != nil {
			return fmt.Errorf("DEL of %s's failed sandbox: %w", p.Name, derr)
		}
		p.rt = sandbox(p.ns.Path, p.Name)
		select {
		case <-ctx.Done():
			return fmt.Errorf("ADD %s: gave up after %d attempts (last: %v): %w", p.Name, p.Attempts, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func resultAddr(res types.Result) (netip.Addr, error) {
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("convert result: %w", err)
	}
	for _, ip := range cur.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP); ok && a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("result has no IPv4 address: %v", cur.IPs)
}

// CheckPod runs CNI CHECK for the pod (libcni sends the cached ADD result).
func (c *Cluster) CheckPod(ctx context.Context, p *Pod) error {
	return p.Node.cni.CheckNetworkList(ctx, p.Node.list, p.rt)
}

// DeletePod runs CNI DEL for the pod, then deletes its namespace, as a
// runtime removes a sandbox.
func (c *Cluster) DeletePod(ctx context.Context, p *Pod) error {
	p.stopServing()
	if err := p.Node.cni.DelNetworkList(ctx, p.Node.list, p.rt); err != nil {
		return fmt.Errorf("DEL %s: %w", p.Name, err)
	}
	c.forget(p)
	return p.release()
}

// DropPod deletes the pod's namespace without DEL, as when its node is
// gone.
func (c *Cluster) DropPod(p *Pod) error {
	c.forget(p)
	return p.release()
}

func (c *Cluster) forget(p *Pod) {
	c.mu.Lock()
	delete(c.pods, p)
	c.mu.Unlock()
}

// release stops the pod's server and deletes its namespace.
func (p *Pod) release() error {
	p.stopServing()
	return p.ns.Delete()
}

// AddResult is the outcome of one pod's ADD in a burst.
type AddResult struct {
	Pod *Pod
	Err error
}

// AddPods creates perNode pods on every live node and runs their ADDs in a
// burst, as when a deployment scales up: all at once, or at most parallel
// in flight per node when parallel > 0. It returns each pod's outcome.
// Pods that failed stay in the cluster (DeletePod or Close removes them).
func (c *Cluster) AddPods(ctx context.Context, perNode, parallel int, namePrefix string) ([]AddResult, error) {
	var pods []*Pod
	for _, n := range c.liveNodes() {
		for i := range perNode {
			p, err := c.NewPod(n, fmt.Sprintf("%s-%d-%d", namePrefix, n.Index, i))
			if err != nil {
				return nil, err
			}
			pods = append(pods, p)
		}
	}
	out := make([]AddResult, len(pods))
	sems := map[*Node]chan struct{}{}
	for _, p := range pods {
		if _, ok := sems[p.Node]; !ok && parallel > 0 {
			sems[p.Node] = make(chan struct{}, parallel)
		}
	}
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sem := sems[p.Node]; sem != nil {
				sem <- struct{}{}
				defer func() { <-sem }()
			}
			out[i] = AddResult{Pod: p, Err: c.AddPod(ctx, p)}
		}()
	}
	wg.Wait()
	return out, nil
}

// DeletePods runs DEL for every pod at once and returns the failures.
func (c *Cluster) DeletePods(ctx context.Context, pods []*Pod) []error {
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.DeletePod(ctx, p)
		}()
	}
	wg.Wait()
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	return out
}

// GC runs CNI GC on the node as a runtime does once it knows its
// sandboxes: every attachment the plugin holds that is not one of valid's
// (the node's pods among them) is released.
func (c *Cluster) GC(ctx context.Context, n *Node, valid []*Pod) error {
	args := &libcni.GCArgs{}
	for _, p := range valid {
		if p.Node == n {
			args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.rt.ContainerID, IfName: p.rt.IfName})
		}
	}
	if err := n.cni.GCNetworkList(ctx, n.list, args); err != nil {
		return fmt.Errorf("GC on %s: %w", n.Name, err)
	}
	return nil
}
