package brokerlink

import "net/netip"

// Delivery is one ENI of the broker's record with the addresses and
// prefixes on it that the pool does not hold yet.
type Delivery struct {
	ENIID       string
	MAC         string
	DeviceIndex int
	Addrs       []netip.Addr
	Prefixes    []netip.Prefix
}

// Arrivals brings what the broker delivered into the pool once the node
// itself sees it (the daemon confirms it in IMDS and sets up a new ENI's
// host side first). The link tells it what each snapshot delivers and
// reads how much is still on its way; it never touches IMDS or the host.
type Arrivals interface {
	// Await replaces what is awaited for d's ENI with d. The link calls it
	// for every ENI of a snapshot, before it drops from the pool what the
	// broker stopped listing, so an address Await no longer names is never
	// added afterwards.
	Await(d Delivery)
	// Forget drops what was awaited for an ENI the broker no longer lists.
	Forget(eniID string)
	// Hold calls f with the number of addresses awaited (16 per prefix)
	// while none moves into the pool, so f can read the pool and the count
	// as one.
	Hold(f func(awaited int))
}
