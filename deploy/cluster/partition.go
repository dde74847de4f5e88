package cluster

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
)

// linkProxy carries one node's connections to the brokers (Config.Partitionable),
// so a test can cut them as a network partition would (Node.Partition):
// while cut, no byte moves in either direction, on connections open before
// the cut and on new ones alike. Connections are not closed by the cut —
// what a dropped path does to TCP is nothing visible, until a timeout of
// the agent's or the broker's own gives up on it — and bytes held during
// the cut move on once it heals, as TCP's retransmissions would deliver
// them.
type linkProxy struct {
	mu     sync.Mutex
	healed *sync.Cond
	cut    bool
	closed bool
	lis    []net.Listener
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newLinkProxy listens on a loopback port for each broker address and
// returns the proxy and its addresses, in the order of targets.
func newLinkProxy(targets []string) (*linkProxy, []string, error) {
	p := &linkProxy{conns: map[net.Conn]struct{}{}}
	p.healed = sync.NewCond(&p.mu)
	var addrs []string
	for _, t := range targets {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.close()
			return nil, nil, fmt.Errorf("partition proxy: %w", err)
		}
		p.lis = append(p.lis, lis)
		addrs = append(addrs, lis.Addr().String())
		p.wg.Go(func() { p.accept(lis, t) })
	}
	return p, addrs, nil
}

// setCut cuts (true) or heals the node's links.
func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	if !cut {
		p.healed.Broadcast()
	}
}

// pass waits while the links are cut; false once the proxy is closed.
func (p *linkProxy) pass() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.healed.Wait()
	}
	return !p.closed
}

func (p *linkProxy) accept(lis net.Listener, target string) {
	for {
		in, err := lis.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			in.Close()
			return
		}
		p.wg.Go(func() { p.carry(in, target) })
	}
}

// carry connects in to the broker once the links pass, then copies both
// ways until either side closes.
func (p *linkProxy) carry(in net.Conn, target string) {
	defer p.untrack(in)
	if !p.pass() {
		return
	}
	out, err := net.Dial("tcp", target)
	if err != nil {
		return // the agent sees its connection closed, as a broker that is down
	}
	if !p.track(out) {
		out.Close()
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { p.copy(out, in); done <- struct{}{} }()
	go func() { p.copy(in, out); done <- struct{}{} }()
	<-done
	in.Close()
	out.Close()
	<-done
}

// copy moves bytes from src to dst, holding each read while the links are
// cut.
func (p *linkProxy) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *linkProxy) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *linkProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.healed.Broadcast()
	for _, l := range p.lis {
		l.Close()
	}
	p.wg.Wait()
}

// Partition cuts (true) or heals the node's links to every broker, when the
// cluster was started with Config.Partitionable. The agent keeps running
// and serving its pods from what it holds; the brokers hear nothing from
// it until the links heal.
func (n *Node) Partition(cut bool) error {
	if n.links == nil {
		return errors.New("the cluster was started without Config.Partitionable")
	}
	n.links.setCut(cut)
	return nil
}

// brokerAddrsFor is the --broker list of a node's agent: the brokers'
// addresses, or its proxy's for a partitionable cluster.
func (c *Cluster) brokerAddrsFor(n *Node) (string, error) {
	if !c.cfg.Partitionable {
		return c.BrokerAddrs(), nil
	}
	p, addrs, err := newLinkProxy(strings.Split(c.BrokerAddrs(), ","))
	if err != nil {
		return "", err
	}
	n.links = p
	return strings.Join(addrs, ","), nil
}
