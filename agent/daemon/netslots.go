package daemon

// hostNetParallel is how many pods' networks are set up, torn down or
// checked at once. The kernel takes one lock (RTNL) for most link, address
// and route changes, so more at once finish no sooner; but every call in
// flight holds a goroutine deep in netlink and a namespace switch, whose
// stack stays grown until the GC shrinks it. A runtime that deletes a
// node's 110 pods at once would otherwise have them all in flight: that
// alone grew the agent's stacks by about 10 MiB.
const hostNetParallel = 8

// netSlots bounds the pod network work in flight to hostNetParallel.
type netSlots chan struct{}

func newNetSlots() netSlots { return make(netSlots, hostNetParallel) }

// take waits for a slot; the returned func gives it back.
func (s netSlots) take() (release func()) {
	s <- struct{}{}
	return func() { <-s }
}
