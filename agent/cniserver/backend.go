// Package cniserver serves the allot CNI plugin on the agent's unix socket.
//
// It is the agent's side of CNIService: it checks each request once, by the
// CNI spec's rules, before anything else sees it, turns it into Go types,
// hands it to a Backend (the agent's pool and host network, declared here by
// the consumer), and maps the backend's domain errors to gRPC codes in one
// table (ErrorCodes) that the plugin maps back to CNI error codes. It also
// replays DELs that the plugin queued on disk while the agent was down,
// through the same check.
package cniserver

import (
	"context"
	"net/netip"
	"time"

	"github.com/allotnet/allot/agent/hostnet"
)

// Attachment is the key of one CNI attachment, as CNI defines it. Every
// allocation is keyed by it, never by pod name (a pod recreated with the same
// name gets a new container ID, so an old sandbox's DEL can't reach it). It
// is the host network's own key type, so the key reaches the veth it names
// without another conversion; the server checks it once, on the way in (see
// allotv1.Attachment.Validate).
type Attachment = hostnet.Attachment

// Request is one ADD, DEL or CHECK for an attachment.
type Request struct {
	Attachment Attachment
	// NetNS is the path of the pod's network namespace; it may be empty on
	// DEL (the runtime may have removed the namespace already).
	NetNS string
	// CNIVersion is the spec version the runtime asked for.
	CNIVersion   string
	PodNamespace string
	PodName      string
	// PrevResult is the runtime's prevResult as JSON, converted by the plugin
	// to the current spec version (1.1.0) so the agent parses one format. Set
	// on CHECK, and on DEL when the runtime sent one.
	PrevResult []byte
	// QueuedAt is set only on a DEL replayed from the on-disk queue: when the
	// plugin queued it because the agent was down. The backend must not
	// remove an attachment it recorded after this time, since such a record
	// belongs to an ADD that came after the DEL.
	QueuedAt time.Time
}

// AddResult is what the backend set up for an attachment.
type AddResult struct {
	// Address is the pod's address; always a /32.
	Address netip.Prefix
	// Gateway is the pod's default gateway (169.254.1.1, answered by the
	// host veth through a permanent ARP entry).
	Gateway      netip.Addr
	HostIfName   string
	HostMAC      string
	ContainerMAC string
	// ENIID is the ENI that owns the address.
	ENIID string
}

// GCRequest asks the backend to remove every attachment of Network that is
// not in Valid (the runtime's cni.dev/valid-attachments).
type GCRequest struct {
	Network string
	Valid   []Attachment
}

// Backend is what the CNI server needs from the agent. Every method must be
// safe for concurrent use and idempotent: the runtime retries, and queued
// DELs are replayed.
type Backend interface {
	// Add sets up the attachment and returns its address. An ADD for an
	// attachment that already exists returns the same result.
	Add(ctx context.Context, req Request) (AddResult, error)
	// Del tears the attachment down. Deleting an unknown attachment succeeds.
	Del(ctx context.Context, req Request) error
	// Check verifies the attachment is as recorded and as req.PrevResult says.
	Check(ctx context.Context, req Request) error
	// GC removes the attachments of req.Network not in req.Valid and returns
	// what it removed.
	GC(ctx context.Context, req GCRequest) ([]Attachment, error)
	// Status returns nil when the agent can serve ADDs, ErrPoolEmpty when
	// its pool is empty and cannot be refilled, ErrNotReady while starting.
	Status(ctx context.Context) error
}
