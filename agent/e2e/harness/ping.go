package harness

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// Ping sends up to attempts ICMP echo requests from inside ns to dst, a
// second apart at most, until one is answered. Only addresses inside the
// harness's own namespaces are ever pinged.
func Ping(ns *NetNS, dst netip.Addr, attempts int) error {
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
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("allot-e2e")}}
		b, _ := msg.Marshal(nil)
		if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
			return fmt.Errorf("send to %s from %s: %w", dst, ns.Name, err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, peer, err := conn.ReadFrom(buf)
			if err != nil {
				break // timed out: next attempt
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
	return fmt.Errorf("no echo reply from %s in %s", dst, ns.Name)
}
