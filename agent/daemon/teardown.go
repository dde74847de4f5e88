package daemon

import (
	"sync"
	"time"

	"github.com/allotnet/allot/agent/hostnet"
)

// Tearing down after the answer.
//
// A DEL is answered once the release is durable (cni.go); the pod's host
// pieces are removed after, with the address held back in the pool until
// they are. A teardown that fails is retried a few times; if it still
// fails, the address stays held back (heldTeardowns) and the next GC that
// removes the pieces no record accounts for — this pod's among them — lets
// it go. A crash before the teardown is done leaves pieces no record
// accounts for, and the restarted agent removes them before it serves.

// Teardown retries: the delay before the first retry, doubling, and how
// many attempts in all (about 1.5 s of retrying).
const (
	teardownRetryDelay = 50 * time.Millisecond
	teardownAttempts   = 6
)

// heldTeardowns are the holds that last until a GC has removed the pieces
// no record accounts for: of failed teardowns (by host veth name) and of
// addresses a stray veth routed at start.
type heldTeardowns struct {
	mu    sync.Mutex
	holds map[string]func()
}

func (h *heldTeardowns) add(key string, unhold func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds == nil {
		h.holds = map[string]func(){}
	}
	h.holds[key] = unhold
}

// take returns the held teardowns and forgets them.
func (h *heldTeardowns) take() map[string]func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.holds
	h.holds = nil
	return out
}

// finishTeardown removes a released pod's host pieces, retrying, and then
// ends its address's hold; if every attempt fails the hold stays until a
// GC has removed the pieces.
func (a *Agent) finishTeardown(pc hostnet.PodConfig, unhold func()) {
	delay := teardownRetryDelay
	for attempt := 1; ; attempt++ {
		err := a.teardownPod(pc)
		if err == nil {
			unhold()
			return
		}
		if attempt == teardownAttempts {
			a.log.Error("released pod's network could not be torn down; its address is held back until CNI GC removes the pieces",
				"attachment", pc.Attachment.String(), "addr", pc.Address, "attempts", attempt, "err", err)
			a.heldTeardowns.add(hostnet.HostVethName(pc.Attachment), unhold)
			return
		}
		a.log.Warn("tearing down a released pod's network failed; retrying", "attachment", pc.Attachment.String(),
			"addr", pc.Address, "attempt", attempt, "err", err)
		time.Sleep(delay)
		delay *= 2
	}
}

// releaseHeldTeardowns ends the holds of failed teardowns taken before a
// reconcile that has since removed every piece no record accounts for.
func releaseHeldTeardowns(held map[string]func()) {
	for _, unhold := range held {
		unhold()
	}
}

// WaitTeardowns waits until every teardown of an answered DEL has finished.
func (a *Agent) WaitTeardowns() { a.teardowns.Wait() }

// putBack returns holds taken for a reconcile that failed.
func (h *heldTeardowns) putBack(held map[string]func()) {
	for key, unhold := range held {
		h.add(key, unhold)
	}
}
