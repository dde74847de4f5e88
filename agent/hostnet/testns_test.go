package hostnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/internal/netnstest"
)

// testNS is a named network namespace a test created, deleted at cleanup.
type testNS = netnstest.NS

func requireNetNS(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

// runID keeps this process's namespaces apart from anyone else's.
var runID = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

var nsSeq int

// newNS creates allot-t-<run>-<seq>-<role>, registering its deletion first
// thing so a failing test still removes it.
func newNS(t *testing.T, role string) *testNS {
	t.Helper()
	nsSeq++
	ns, err := netnstest.Create(fmt.Sprintf("allot-t-%s-%d-%s", runID, nsSeq, role))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNS(t, ns) })
	return ns
}

// deleteNS removes the namespace; safe to call twice.
func deleteNS(t *testing.T, ns *testNS) {
	t.Helper()
	if err := ns.Delete(); err != nil {
		t.Error(err)
	}
}

// veth creates a veth pair with one end in a and the other in b.
func veth(t *testing.T, a *testNS, aName string, aMAC string, b *testNS, bName string) (netlink.Link, netlink.Link) {
	t.Helper()
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName,
		PeerNamespace: netlink.NsFd(int(b.Handle()))}
	if aMAC != "" {
		mac, _ := net.ParseMAC(aMAC)
		v.HardwareAddr = mac
	}
	if err := a.NL.LinkAdd(v); err != nil {
		t.Fatalf("veth %s/%s: %v", aName, bName, err)
	}
	la, err := a.NL.LinkByName(aName)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.NL.LinkByName(bName)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.NL.LinkSetUp(lb); err != nil {
		t.Fatal(err)
	}
	return la, lb
}

func mustAddr(t *testing.T, nl *netlink.Handle, link netlink.Link, cidr string) {
	t.Helper()
	p := netip.MustParsePrefix(cidr)
	if err := nl.AddrReplace(link, &netlink.Addr{IPNet: prefixToIPNet(p)}); err != nil {
		t.Fatalf("addr %s on %s: %v", cidr, link.Attrs().Name, err)
	}
}

func mustRoute(t *testing.T, nl *netlink.Handle, r *netlink.Route) {
	t.Helper()
	if err := nl.RouteReplace(r); err != nil {
		t.Fatalf("route %v: %v", r, err)
	}
}

func sysctlIn(t *testing.T, ns *testNS, key, value string) {
	t.Helper()
	if err := ns.Sysctl(key, value); err != nil {
		t.Fatalf("sysctl %s in %s: %v", key, ns.Name, err)
	}
}

// ping sends up to three ICMP echo requests from inside ns, a second apart,
// until one is answered by dst.
func ping(ns *testNS, dst netip.Addr) error { return pingN(ns, dst, 3) }

// pingFails expects no answer. One unanswered request is enough: when the
// network is right the answer cannot come, so waiting longer adds nothing.
func pingFails(ns *testNS, dst netip.Addr) bool { return pingN(ns, dst, 1) != nil }

// pingN sends up to attempts echo requests. The ID is random per call so an
// old conntrack entry (with its NAT binding) is never reused.
func pingN(ns *testNS, dst netip.Addr, attempts int) error {
	var conn *icmp.PacketConn
	err := ns.Do(func() error {
		c, err := icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		conn = c
		return err
	})
	if err != nil {
		return fmt.Errorf("icmp socket in %s: %w", ns.Name, err)
	}
	defer conn.Close()
	idb := make([]byte, 2)
	_, _ = rand.Read(idb)
	id := int(idb[0])<<8 | int(idb[1])
	buf := make([]byte, 1500)
	for seq := 1; seq <= attempts; seq++ {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("allot")}}
		b, _ := msg.Marshal(nil)
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("send to %s from %s: %w", dst, ns.Name, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, peer, err := conn.ReadFrom(buf)
			if err != nil {
				break // timeout: next attempt
			}
			m, err := icmp.ParseMessage(1, buf[:n])
			if err != nil || m.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq &&
				peer.(*net.IPAddr).IP.Equal(dst.AsSlice()) {
				return nil
			}
		}
	}
	return fmt.Errorf("no echo reply from %s to %s", dst, ns.Name)
}

// snapshot renders a namespace's links, rules and routes of every table
// (not kernel-generated local/broadcast ones), sorted, for before/after
// comparisons.
func snapshot(t *testing.T, ns *testNS) []string {
	t.Helper()
	var out []string
	links, err := ns.NL.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
		out = append(out, fmt.Sprintf("link %s %s", l.Attrs().Name, l.Type()))
	}
	rules, err := ns.NL.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		out = append(out, fmt.Sprintf("rule %d from %s to %s table %d goto %d",
			r.Priority, ipNetString(r.Src), ipNetString(r.Dst), r.Table, r.Goto))
	}
	routes, err := ns.NL.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		out = append(out, fmt.Sprintf("route table %d %s via %v dev %s", r.Table, ipNetString(r.Dst), r.Gw, names[r.LinkIndex]))
	}
	slices.Sort(out)
	return out
}

// waitLinkGone waits for the kernel's asynchronous namespace cleanup to
// take a veth whose peer's namespace was deleted.
func waitLinkGone(t *testing.T, ns *testNS, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := ns.NL.LinkByName(name); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still exists 10 s after its peer's namespace was deleted", name)
}
