package world

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"net/netip"
)

// addrPool is a subnet's IPv4 addresses as a bitmap: finite, exact, and fast
// enough to scan a /16 for a free /28 in a few microseconds. The first four
// addresses and the last are reserved, as AWS reserves them.
type addrPool struct {
	cidr   netip.Prefix
	base   uint32
	size   uint32 // addresses in the CIDR
	used   []uint64
	free   int // usable addresses not in use
	cursor uint32
	random bool
	rng    *rand.Rand
}

// reservedLow is the number of addresses AWS keeps at the start of a subnet
// (network, router, DNS, future use); the broadcast address is kept at the end.
const reservedLow = 4

// ReservedPerSubnet is the number of addresses of every subnet AWS keeps.
const ReservedPerSubnet = reservedLow + 1

func newAddrPool(cidr netip.Prefix, random bool, rng *rand.Rand) *addrPool {
	size := uint32(1) << (32 - cidr.Bits())
	p := &addrPool{
		cidr:   cidr.Masked(),
		base:   ip4ToU32(cidr.Masked().Addr()),
		size:   size,
		used:   make([]uint64, (size+63)/64),
		free:   int(size) - ReservedPerSubnet,
		cursor: reservedLow,
		random: random,
		rng:    rng,
	}
	for i := uint32(0); i < reservedLow; i++ {
		p.set(i)
	}
	p.set(size - 1)
	return p
}

func ip4ToU32(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func u32ToIP4(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

func (p *addrPool) isSet(off uint32) bool { return p.used[off/64]&(1<<(off%64)) != 0 }
func (p *addrPool) set(off uint32)        { p.used[off/64] |= 1 << (off % 64) }
func (p *addrPool) clear(off uint32)      { p.used[off/64] &^= 1 << (off % 64) }

// offset returns a's offset in the subnet, or false if a is outside it.
func (p *addrPool) offset(a netip.Addr) (uint32, bool) {
	if !a.Is4() || !p.cidr.Contains(a) {
		return 0, false
	}
	return ip4ToU32(a) - p.base, true
}

// reserved reports whether the offset is one of AWS's five.
func (p *addrPool) reserved(off uint32) bool { return off < reservedLow || off == p.size-1 }

// take allocates one free address, or returns false when the subnet is full.
func (p *addrPool) take() (netip.Addr, bool) {
	if p.free == 0 {
		return netip.Addr{}, false
	}
	start := p.cursor
	if p.random {
		start = p.rng.Uint32N(p.size)
	}
	off, ok := p.scanFree(start)
	if !ok {
		return netip.Addr{}, false
	}
	p.set(off)
	p.free--
	p.cursor = (off + 1) % p.size
	return u32ToIP4(p.base + off), true
}

// scanFree finds the first clear bit at or after start, wrapping around.
func (p *addrPool) scanFree(start uint32) (uint32, bool) {
	n := uint32(len(p.used))
	w := start / 64
	// First word: ignore bits below start.
	if m := ^p.used[w] &^ (1<<(start%64) - 1); m != 0 {
		if off := w*64 + uint32(bits.TrailingZeros64(m)); off < p.size {
			return off, true
		}
	}
	for i := uint32(1); i <= n; i++ {
		wi := (w + i) % n
		if m := ^p.used[wi]; m != 0 {
			if off := wi*64 + uint32(bits.TrailingZeros64(m)); off < p.size {
				return off, true
			}
		}
	}
	return 0, false
}

// claim allocates the given address; it fails if a is outside the subnet,
// reserved or in use.
func (p *addrPool) claim(a netip.Addr) *Error {
	off, ok := p.offset(a)
	if !ok {
		return errorf(CodeInvalidParameterValue, "Address %s does not fall within the subnet's address range", a)
	}
	if p.reserved(off) {
		return errorf(CodeInvalidParameterValue, "Address %s is reserved by AWS", a)
	}
	if p.isSet(off) {
		return errorf(CodeAddressInUse, "The specified address %s is already in use.", a)
	}
	p.set(off)
	p.free--
	return nil
}

// release frees one address.
func (p *addrPool) release(a netip.Addr) {
	if off, ok := p.offset(a); ok && !p.reserved(off) && p.isSet(off) {
		p.clear(off)
		p.free++
	}
}

// blocks is the number of /28 blocks in the subnet (0 for subnets smaller than /28).
func (p *addrPool) blocks() uint32 { return p.size / 16 }

// blockFree reports whether the 16 addresses of /28 block b are all free.
func (p *addrPool) blockFree(b uint32) bool {
	return (p.used[b/4]>>((b%4)*16))&0xffff == 0
}

// takePrefix allocates a free, aligned /28, or returns false when the free
// addresses are too fragmented (or too few) to hold one.
func (p *addrPool) takePrefix() (netip.Prefix, bool) {
	n := p.blocks()
	if n == 0 || p.free < 16 {
		return netip.Prefix{}, false
	}
	start := uint32(0)
	if p.random {
		start = p.rng.Uint32N(n)
	}
	for i := range n {
		b := (start + i) % n
		if p.blockFree(b) {
			p.used[b/4] |= 0xffff << ((b % 4) * 16)
			p.free -= 16
			return netip.PrefixFrom(u32ToIP4(p.base+b*16), 28), true
		}
	}
	return netip.Prefix{}, false
}

// claimPrefix allocates the given /28.
func (p *addrPool) claimPrefix(pfx netip.Prefix) *Error {
	if pfx.Bits() != 28 || pfx.Masked() != pfx || !pfx.Addr().Is4() {
		return errorf(CodeInvalidParameterValue, "Prefix %s must be an aligned IPv4 /28", pfx)
	}
	off, ok := p.offset(pfx.Addr())
	if !ok || p.blocks() == 0 {
		return errorf(CodeInvalidParameterValue, "Prefix %s does not fall within the subnet's address range", pfx)
	}
	if !p.blockFree(off / 16) {
		return errorf(CodeAddressInUse, "The specified prefix %s overlaps addresses already in use.", pfx)
	}
	b := off / 16
	p.used[b/4] |= 0xffff << ((b % 4) * 16)
	p.free -= 16
	return nil
}

// releasePrefix frees a /28 allocated by takePrefix or claimPrefix.
func (p *addrPool) releasePrefix(pfx netip.Prefix) {
	off, ok := p.offset(pfx.Addr())
	if !ok {
		return
	}
	b := off / 16
	p.used[b/4] &^= 0xffff << ((b % 4) * 16)
	p.free += 16
}
