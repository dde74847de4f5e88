package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/allotnet/allot/internal/netnstest"
)

// Ports of the probe servers: every pod echoes on podPort; the outside host
// tells each caller the address it saw on outsidePort.
const (
	podPort     = 7000
	outsidePort = 8080
	probeWait   = 5 * time.Second
)

// Serve starts the pod's echo server on its address, inside its namespace.
// It runs until the pod is deleted.
func (p *Pod) Serve() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		return nil
	}
	ln, err := listenIn(p.ns.Do, netip.AddrPortFrom(p.Addr, podPort))
	if err != nil {
		return fmt.Errorf("serve in pod %s: %w", p.Name, err)
	}
	p.listener = ln
	go acceptLoop(ln, func(c net.Conn) {
		line, err := bufio.NewReader(c).ReadString('\n')
		if err == nil {
			_, _ = io.WriteString(c, line)
		}
	})
	return nil
}

func (p *Pod) stopServing() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.listener != nil {
		_ = p.listener.Close()
		p.listener = nil
	}
}

// listenIn opens a TCP listener on addr inside a namespace; the socket stays
// there after the thread leaves.
func listenIn(do func(func() error) error, addr netip.AddrPort) (net.Listener, error) {
	var ln net.Listener
	err := do(func() error {
		var err error
		ln, err = net.Listen("tcp4", addr.String())
		return err
	})
	return ln, err
}

// acceptLoop serves each connection with handle until ln closes.
func acceptLoop(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(probeWait))
			handle(c)
		}()
	}
}

// exchange connects from inside the pod's namespace (from its address) to
// dst, sends one line and returns the line that comes back.
func (p *Pod) exchange(ctx context.Context, dst netip.AddrPort, msg string) (string, error) {
	var conn net.Conn
	err := p.ns.Do(func() error {
		d := net.Dialer{Timeout: probeWait, LocalAddr: &net.TCPAddr{IP: p.Addr.AsSlice()}}
		var err error
		conn, err = d.DialContext(ctx, "tcp4", dst.String())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("connect %s -> %s: %w", p.Addr, dst, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(probeWait))
	if _, err := io.WriteString(conn, msg+"\n"); err != nil {
		return "", fmt.Errorf("send %s -> %s: %w", p.Addr, dst, err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read reply %s -> %s: %w", p.Addr, dst, err)
	}
	return strings.TrimSuffix(line, "\n"), nil
}

// PingPod opens a TCP connection from pod p to pod q's echo server and
// checks the echo: real packets through both nodes' host networking and
// the VPC router.
func (p *Pod) PingPod(ctx context.Context, q *Pod) error {
	want := fmt.Sprintf("hello %s from %s", q.Addr, p.Addr)
	got, err := p.exchange(ctx, netip.AddrPortFrom(q.Addr, podPort), want)
	if err != nil {
		return fmt.Errorf("%s -> %s: %w", p, q, err)
	}
	if got != want {
		return fmt.Errorf("%s -> %s: echo %q, want %q", p, q, got, want)
	}
	return nil
}

// SeenOutside connects from the pod to the outside host (beyond the VPC)
// and returns the source address the outside host saw.
func (p *Pod) SeenOutside(ctx context.Context, outside netip.Addr) (netip.Addr, error) {
	got, err := p.exchange(ctx, netip.AddrPortFrom(outside, outsidePort), "who am i")
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s -> outside: %w", p, err)
	}
	a, err := netip.ParseAddr(got)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s -> outside: reply %q is not an address", p, got)
	}
	return a, nil
}

// outsideServer is the host beyond the VPC: it answers every connection
// with the peer address it saw, which is how SNAT is proven.
type outsideServer struct{ ln net.Listener }

func startOutside(nsPath string, addr netip.Addr) (*outsideServer, error) {
	ln, err := listenIn(func(fn func() error) error { return netnstest.DoInPath(nsPath, fn) }, netip.AddrPortFrom(addr, outsidePort))
	if err != nil {
		return nil, fmt.Errorf("outside server: %w", err)
	}
	go acceptLoop(ln, func(c net.Conn) {
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return
		}
		peer, _ := netip.ParseAddrPort(c.RemoteAddr().String())
		_, _ = io.WriteString(c, peer.Addr().Unmap().String()+"\n")
	})
	return &outsideServer{ln: ln}, nil
}

func (o *outsideServer) close() error {
	if err := o.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// ProbeResult is the outcome of a set of connectivity checks.
type ProbeResult struct {
	Tried  int
	Failed []error
}

// OK reports whether every check passed (and there was at least one).
func (r ProbeResult) OK() bool { return r.Tried > 0 && len(r.Failed) == 0 }

// CrossNodePairs pairs every pod with a pod on the next node (in node
// order, round robin within the node), so every check crosses nodes, every
// pod is checked as a source and, when nodes hold as many pods each, as a
// destination. Nil with one node.
func CrossNodePairs(pods []*Pod) [][2]*Pod {
	var nodes []*Node
	by := map[*Node][]*Pod{}
	for _, p := range pods {
		if _, ok := by[p.Node]; !ok {
			nodes = append(nodes, p.Node)
		}
		by[p.Node] = append(by[p.Node], p)
	}
	if len(nodes) < 2 {
		return nil
	}
	var out [][2]*Pod
	for i, n := range nodes {
		next := by[nodes[(i+1)%len(nodes)]]
		for j, p := range by[n] {
			out = append(out, [2]*Pod{p, next[j%len(next)]})
		}
	}
	return out
}

// CheckPairs runs PingPod for every pair, a few at a time.
func (c *Cluster) CheckPairs(ctx context.Context, pairs [][2]*Pod) ProbeResult {
	return parallel(len(pairs), func(i int) error {
		if err := pairs[i][1].Serve(); err != nil {
			return err
		}
		return pairs[i][0].PingPod(ctx, pairs[i][1])
	})
}

// CheckSNAT connects every pod to the outside host and checks the outside
// saw the pod's node primary address: the agent's SNAT at work, since the
// VPC lets only node primary addresses reach the outside.
func (c *Cluster) CheckSNAT(ctx context.Context, pods []*Pod) ProbeResult {
	out := c.Plane.OutsideAddr()
	return parallel(len(pods), func(i int) error {
		p := pods[i]
		seen, err := p.SeenOutside(ctx, out)
		if err != nil {
			return err
		}
		if seen != p.Node.PrimaryIP {
			return fmt.Errorf("%s -> outside: seen as %s, want the node's primary address %s", p, seen, p.Node.PrimaryIP)
		}
		return nil
	})
}

// parallel runs n checks, 8 at a time, and collects the failures.
func parallel(n int, check func(i int) error) ProbeResult {
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = check(i)
		}()
	}
	wg.Wait()
	r := ProbeResult{Tried: n}
	for _, e := range errs {
		if e != nil {
			r.Failed = append(r.Failed, e)
		}
	}
	return r
}
