package world

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

func TestAddrPoolExactCounts(t *testing.T) {
	for _, bits := range []int{16, 20, 24, 27, 28} {
		p := newAddrPool(netip.PrefixFrom(netip.MustParseAddr("10.1.0.0"), bits), false, nil)
		usable := (1 << (32 - bits)) - ReservedPerSubnet
		if p.free != usable {
			t.Fatalf("/%d: free %d; want %d", bits, p.free, usable)
		}
		seen := map[netip.Addr]bool{}
		for i := 0; ; i++ {
			a, ok := p.take()
			if !ok {
				if i != usable {
					t.Fatalf("/%d: took %d addresses; want %d", bits, i, usable)
				}
				break
			}
			off, _ := p.offset(a)
			if seen[a] || p.reserved(off) {
				t.Fatalf("/%d: handed out %s twice or a reserved one", bits, a)
			}
			seen[a] = true
		}
		if p.free != 0 {
			t.Fatalf("/%d: free %d after exhaustion", bits, p.free)
		}
		for a := range seen {
			p.release(a)
		}
		if p.free != usable {
			t.Fatalf("/%d: free %d after release; want %d", bits, p.free, usable)
		}
	}
}

func TestAddrPoolPrefixFragmentation(t *testing.T) {
	p := newAddrPool(netip.MustParsePrefix("10.1.0.0/24"), false, nil)
	// Block 0 holds reserved addresses and the last block the broadcast, so
	// a /24 has 14 prefix-able blocks.
	var got []netip.Prefix
	for {
		pfx, ok := p.takePrefix()
		if !ok {
			break
		}
		got = append(got, pfx)
	}
	if len(got) != 14 || got[0].String() != "10.1.0.16/28" {
		t.Fatalf("prefixes %v; want 14 starting at 10.1.0.16/28", got)
	}
	for _, pfx := range got {
		p.releasePrefix(pfx)
	}
	// One address in every block: 251-14 free addresses, no /28.
	for b := 1; b < 15; b++ {
		if err := p.claim(netip.AddrFrom4([4]byte{10, 1, 0, byte(b*16 + 5)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := p.takePrefix(); ok || p.free != 251-14 {
		t.Fatalf("prefix found in a fragmented subnet (free %d)", p.free)
	}
	if err := p.claimPrefix(netip.MustParsePrefix("10.1.0.32/28")); err == nil || err.Code != CodeAddressInUse {
		t.Fatalf("claimPrefix over a used address: %v", err)
	}
	if err := p.claimPrefix(netip.MustParsePrefix("10.1.0.36/28")); err == nil || err.Code != CodeInvalidParameterValue {
		t.Fatalf("claimPrefix of an unaligned prefix: %v", err)
	}
}

func TestAddrPoolRandomFragments(t *testing.T) {
	p := newAddrPool(netip.MustParsePrefix("10.2.0.0/20"), true, rand.New(rand.NewPCG(1, 2)))
	// Random single addresses spread over the subnet: with a quarter of
	// the addresses taken, most /28 blocks are broken.
	for range 1024 {
		if _, ok := p.take(); !ok {
			t.Fatal("take failed")
		}
	}
	free := 0
	for b := range p.blocks() {
		if p.blockFree(b) {
			free++
		}
	}
	if free > 64 {
		t.Fatalf("%d of 256 /28 blocks still free after 1024 random takes; want heavy fragmentation", free)
	}
}

func TestFragmentSubnet(t *testing.T) {
	w := New(Config{})
	v, err := w.AddVPC(VPCSpec{CIDRs: []string{"10.9.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	sn, err := w.AddSubnet(SubnetSpec{VPCID: v.ID, CIDR: "10.9.0.0/24", AvailabilityZone: "us-east-1a"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := w.FragmentSubnet(sn.ID)
	if err != nil || n != 14 { // the first and last blocks hold AWS's reserved addresses
		t.Fatalf("FragmentSubnet = %d, %v; want 14 addresses taken", n, err)
	}
	after, _ := w.Subnet(sn.ID)
	if after.AvailableIPs != 251-14 {
		t.Errorf("available = %d; want %d", after.AvailableIPs, 251-14)
	}
	if _, ok := w.subnets[sn.ID].pool.takePrefix(); ok {
		t.Error("a /28 was still free after fragmenting")
	}
	if _, err := w.FragmentSubnet("subnet-0000000000000000f"); err == nil {
		t.Error("fragmenting an unknown subnet succeeded")
	}
}
