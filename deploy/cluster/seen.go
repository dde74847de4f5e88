package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// seenPort is where a pod tells each caller the source address it saw.
const seenPort = 7001

// CheckSeenAsThemselves connects every pair's first pod to the second and
// checks the second saw the first's own address: traffic between pod
// addresses stays untranslated across every CIDR of the VPC (with custom
// networking, 100.64.0.0/16 as well as 10.0.0.0/16). An echo alone would
// not tell: a pod reached through its node's SNAT still echoes.
func (c *Cluster) CheckSeenAsThemselves(ctx context.Context, pairs [][2]*Pod) ProbeResult {
	listeners := map[*Pod]net.Listener{}
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	for _, pr := range pairs {
		q := pr[1]
		if listeners[q] != nil {
			continue
		}
		ln, err := listenIn(q.ns.Do, netip.AddrPortFrom(q.Addr, seenPort))
		if err != nil {
			return ProbeResult{Tried: len(pairs), Failed: []error{fmt.Errorf("listen in pod %s: %w", q.Name, err)}}
		}
		listeners[q] = ln
		go acceptLoop(ln, func(conn net.Conn) {
			if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
				return
			}
			peer, _ := netip.ParseAddrPort(conn.RemoteAddr().String())
			_, _ = io.WriteString(conn, peer.Addr().Unmap().String()+"\n")
		})
	}
	return parallel(len(pairs), func(i int) error {
		p, q := pairs[i][0], pairs[i][1]
		got, err := p.exchange(ctx, netip.AddrPortFrom(q.Addr, seenPort), "who am i")
		if err != nil {
			return fmt.Errorf("%s -> %s: %w", p, q, err)
		}
		if got != p.Addr.String() {
			return fmt.Errorf("%s -> %s: seen as %s, not the pod's own address", p, q, got)
		}
		return nil
	})
}
