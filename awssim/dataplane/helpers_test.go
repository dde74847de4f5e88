package dataplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/internal/netnstest"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

var (
	runID = func() string {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}()
	prefixMu  sync.Mutex
	prefixSeq int
)

// testPrefix is unique to this process and call: allot-t-<run>-dp<n>.
func testPrefix() string {
	prefixMu.Lock()
	defer prefixMu.Unlock()
	prefixSeq++
	return fmt.Sprintf("allot-t-%s-dp%d", runID, prefixSeq)
}

// newPlane starts a plane whose namespaces are removed at cleanup even if
// the test fails.
func newPlane(t *testing.T) *Plane {
	t.Helper()
	p, err := New(Config{Prefix: testPrefix()})
	if err != nil {
		t.Fatalf("new plane: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close plane: %v", err)
		}
		_ = Cleanup(p.Prefix())
	})
	return p
}

func syncPlane(t *testing.T, p *Plane) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Sync(ctx); err != nil {
		t.Fatalf("sync plane: %v", err)
	}
}

// inNS runs fn inside the namespace at path.
func inNS(t *testing.T, path string, fn func() error) error {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open netns %s: %v", path, err)
	}
	defer h.Close()
	return netnstest.DoIn(h, fn)
}

// nlAt opens a netlink handle in the namespace at path.
func nlAt(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("open netns %s: %v", path, err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink in %s: %v", path, err)
	}
	t.Cleanup(nl.Close)
	return nl
}

// linkByMAC finds a link as the agent does, or returns nil.
func linkByMAC(t *testing.T, nl *netlink.Handle, mac string) netlink.Link {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatalf("mac %q: %v", mac, err)
	}
	links, err := nl.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	for _, l := range links {
		if bytes.Equal(l.Attrs().HardwareAddr, hw) {
			return l
		}
	}
	return nil
}

func v4Addrs(t *testing.T, nl *netlink.Handle, l netlink.Link) []string {
	t.Helper()
	addrs, err := nl.AddrList(l, unix.AF_INET)
	if err != nil {
		t.Fatalf("list addresses of %s: %v", l.Attrs().Name, err)
	}
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

// setupSecondaryENI does by hand what the agent's hostnet does for a
// secondary ENI: link up, its primary address without a prefix route, a
// route table with the subnet and a default route via the gateway, and a
// `from <addr> lookup <table>` rule plus the address itself for each addr
// (standing in for a pod).
func setupSecondaryENI(t *testing.T, nl *netlink.Handle, mac string, primary netip.Addr, subnet netip.Prefix, table int, addrs ...netip.Addr) {
	t.Helper()
	l := linkByMAC(t, nl, mac)
	if l == nil {
		t.Fatalf("no link with mac %s", mac)
	}
	must(t, nl.LinkSetUp(l))
	must(t, nl.AddrReplace(l, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(primary, subnet.Bits())), Flags: unix.IFA_F_NOPREFIXROUTE}))
	idx := l.Attrs().Index
	must(t, nl.RouteReplace(&netlink.Route{LinkIndex: idx, Dst: ipNet(subnet), Src: primary.AsSlice(), Scope: netlink.SCOPE_LINK, Table: table}))
	must(t, nl.RouteReplace(&netlink.Route{LinkIndex: idx, Gw: gateway(subnet).AsSlice(), Table: table}))
	for _, a := range addrs {
		addAddr(t, nl, l, a)
		r := netlink.NewRule()
		r.Family = unix.AF_INET
		r.Src = ipNet(netip.PrefixFrom(a, 32))
		r.Table = table
		r.Priority = 1536
		must(t, nl.RuleAdd(r))
	}
}

func addAddr(t *testing.T, nl *netlink.Handle, l netlink.Link, a netip.Addr) {
	t.Helper()
	must(t, nl.AddrReplace(l, &netlink.Addr{IPNet: ipNet(netip.PrefixFrom(a, 32))}))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ping sends ICMP echo requests from src inside the namespace until one is
// answered or the deadline passes.
func ping(t *testing.T, nsPath string, src, dst netip.Addr) error {
	t.Helper()
	var c *icmp.PacketConn
	err := inNS(t, nsPath, func() error {
		var err error
		c, err = icmp.ListenPacket("ip4:icmp", src.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("icmp socket on %s: %w", src, err)
	}
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for seq := 1; time.Now().Before(deadline); seq++ {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: 0x4a11, Seq: seq, Data: []byte("allot")}}
		b, _ := msg.Marshal(nil)
		if _, err := c.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("send echo to %s: %w", dst, err)
		}
		_ = c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for {
			buf := make([]byte, 1500)
			n, peer, err := c.ReadFrom(buf)
			if err != nil {
				break
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err == nil && m.Type == ipv4.ICMPTypeEchoReply && peer.(*net.IPAddr).IP.Equal(dst.AsSlice()) {
				return nil
			}
		}
	}
	return fmt.Errorf("no echo reply from %s to %s", dst, src)
}

// tcpServe listens on addr:port inside the namespace and echoes one line
// per connection until the test ends.
func tcpServe(t *testing.T, nsPath string, addr netip.Addr, port uint16) {
	t.Helper()
	var ln net.Listener
	err := inNS(t, nsPath, func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(addr, port).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s:%d: %v", addr, port, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				_, _ = c.Write(buf[:n])
			}()
		}
	}()
}

// tcpRoundTrip connects from src inside the namespace and checks the echo.
func tcpRoundTrip(t *testing.T, nsPath string, src, dst netip.Addr, port uint16) error {
	t.Helper()
	var c net.Conn
	err := inNS(t, nsPath, func() error {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: src.AsSlice()}}
		var err error
		c, err = d.Dial("tcp4", netip.AddrPortFrom(dst, port).String())
		return err
	})
	if err != nil {
		return fmt.Errorf("connect %s -> %s:%d: %w", src, dst, port, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	want := "hello from " + src.String()
	if _, err := c.Write([]byte(want)); err != nil {
		return fmt.Errorf("write %s -> %s: %w", src, dst, err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return fmt.Errorf("read echo %s -> %s: %w", src, dst, err)
	}
	if got := string(buf[:n]); got != want {
		return fmt.Errorf("echo %q, want %q", got, want)
	}
	return nil
}

// udpSink records the source of every datagram it receives.
type udpSink struct {
	mu   sync.Mutex
	from map[netip.Addr]int
	got  chan netip.Addr
}

func udpListen(t *testing.T, nsPath string, addr netip.Addr, port uint16) *udpSink {
	t.Helper()
	var c net.PacketConn
	err := inNS(t, nsPath, func() error {
		var err error
		c, err = net.ListenPacket("udp4", netip.AddrPortFrom(addr, port).String())
		return err
	})
	if err != nil {
		t.Fatalf("udp listen on %s:%d: %v", addr, port, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s := &udpSink{from: map[netip.Addr]int{}, got: make(chan netip.Addr, 64)}
	go func() {
		buf := make([]byte, 1500)
		for {
			_, peer, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			a := peer.(*net.UDPAddr).AddrPort().Addr().Unmap()
			s.mu.Lock()
			s.from[a]++
			s.mu.Unlock()
			select {
			case s.got <- a:
			default:
			}
		}
	}()
	return s
}

func (s *udpSink) count(a netip.Addr) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from[a]
}

// waitFrom waits (generously) for a datagram from a.
func (s *udpSink) waitFrom(t *testing.T, a netip.Addr) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for s.count(a) == 0 {
		select {
		case <-s.got:
		case <-deadline:
			t.Fatalf("no datagram from %s", a)
		}
	}
}

// udpSend sends one datagram from src inside the namespace.
func udpSend(t *testing.T, nsPath string, src, dst netip.Addr, port uint16) {
	t.Helper()
	var c net.Conn
	err := inNS(t, nsPath, func() error {
		d := net.Dialer{LocalAddr: &net.UDPAddr{IP: src.AsSlice()}}
		var err error
		c, err = d.Dial("udp4", netip.AddrPortFrom(dst, port).String())
		return err
	})
	if err != nil {
		t.Fatalf("udp socket %s -> %s: %v", src, dst, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("probe")); err != nil {
		t.Fatalf("udp send %s -> %s: %v", src, dst, err)
	}
}

// dropCount reads the packet counter of the VPC rule with this comment.
func dropCount(t *testing.T, p *Plane, chain, cmt string) uint64 {
	t.Helper()
	conn, err := nftables.New(nftables.WithNetNSFd(int(p.vpc.Handle())))
	if err != nil {
		t.Fatalf("nftables: %v", err)
	}
	tab := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftTable}
	rules, err := conn.GetRules(tab, &nftables.Chain{Name: chain, Table: tab})
	if err != nil {
		t.Fatalf("list rules of %s: %v", chain, err)
	}
	for _, r := range rules {
		if c, ok := userdata.GetString(r.UserData, userdata.TypeComment); !ok || c != cmt {
			continue
		}
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				return c.Packets
			}
		}
	}
	t.Fatalf("no rule %q in chain %s", cmt, chain)
	return 0
}

// waitDrop waits until the counter exceeds before: the packet was dropped
// by that very rule.
func waitDrop(t *testing.T, p *Plane, chain, cmt string, before uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for dropCount(t, p, chain, cmt) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("rule %q in %s dropped nothing", cmt, chain)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// vpcRoute returns the VPC router's route to dst in its main table, if any.
func vpcRoute(t *testing.T, nl *netlink.Handle, dst netip.Prefix) (netlink.Route, bool) {
	t.Helper()
	routes, err := nl.RouteListFiltered(unix.AF_INET, &netlink.Route{Dst: ipNet(dst)}, netlink.RT_FILTER_DST)
	if err != nil {
		t.Fatalf("list vpc routes: %v", err)
	}
	for _, r := range routes {
		if dstPrefix(r.Dst) == dst {
			return r, true
		}
	}
	return netlink.Route{}, false
}

// namespacesWithPrefix lists /run/netns entries starting with prefix, as
// `ip netns list` would show them.
func namespacesWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	entries, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read %s: %v", NetnsDir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}
