package world

// Hooks receives the world's data-plane changes, so a test harness can
// mirror them in real network namespaces: a link per attached ENI, routes per
// address. Hooks run after the change, outside the world lock, one event at
// a time in the order the changes happened. They may read the world but must
// not change it synchronously (that would deadlock); start a goroutine to do so.
type Hooks interface {
	// OnAttach fires when an ENI is attached, including an instance's primary
	// ENI when the instance is added.
	OnAttach(instanceID string, eni NetworkInterface)
	// OnDetach fires when a detach completes (after DetachDelay) or the
	// instance is removed; eni is the interface as it was while attached.
	OnDetach(instanceID string, eni NetworkInterface)
	// OnAddressesChanged fires when an ENI's secondary addresses or prefixes
	// change, whether or not it is attached.
	OnAddressesChanged(eni NetworkInterface)
}

// HookFuncs adapts functions to Hooks; nil fields are skipped.
type HookFuncs struct {
	Attach           func(instanceID string, eni NetworkInterface)
	Detach           func(instanceID string, eni NetworkInterface)
	AddressesChanged func(eni NetworkInterface)
}

var _ Hooks = HookFuncs{}

// OnAttach calls f.Attach.
func (f HookFuncs) OnAttach(id string, e NetworkInterface) {
	if f.Attach != nil {
		f.Attach(id, e)
	}
}

// OnDetach calls f.Detach.
func (f HookFuncs) OnDetach(id string, e NetworkInterface) {
	if f.Detach != nil {
		f.Detach(id, e)
	}
}

// OnAddressesChanged calls f.AddressesChanged.
func (f HookFuncs) OnAddressesChanged(e NetworkInterface) {
	if f.AddressesChanged != nil {
		f.AddressesChanged(e)
	}
}

type hookKind int

const (
	hookAttach hookKind = iota
	hookDetach
	hookAddresses
)

type hookEvent struct {
	kind       hookKind
	instanceID string
	eni        NetworkInterface
}

func (e hookEvent) deliver(h Hooks) {
	switch e.kind {
	case hookAttach:
		h.OnAttach(e.instanceID, e.eni)
	case hookDetach:
		h.OnDetach(e.instanceID, e.eni)
	case hookAddresses:
		h.OnAddressesChanged(e.eni)
	}
}

// AddHooks registers h and returns a function that unregisters it.
func (w *World) AddHooks(h Hooks) (remove func()) {
	w.mu.Lock()
	w.hookID++
	id := w.hookID
	w.hooks[id] = h
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.hooks, id)
		w.mu.Unlock()
	}
}

func (w *World) emitLocked(kind hookKind, instanceID string, e *eni) {
	if len(w.hooks) == 0 {
		return
	}
	w.outbox = append(w.outbox, hookEvent{kind: kind, instanceID: instanceID, eni: *e.view()})
}
