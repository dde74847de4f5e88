package store

import (
	"fmt"
	"strings"
	"sync"

	"github.com/allotnet/allot/broker/errs"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors returned by the store. Compare with errors.Is; the text of the
// wrapping error names the record or key involved. They live in broker/errs
// (which links no etcd) and are the same values there.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errs.ErrNotFound
	// ErrConflict means a compared revision changed under the caller; re-read
	// and retry.
	ErrConflict = errs.ErrConflict
	// ErrCorrupt means a stored value does not decode or carries a schema
	// version this code does not understand.
	ErrCorrupt = errs.ErrCorrupt
	// ErrBudgetExceeded is wrapped by *BudgetError.
	ErrBudgetExceeded = errs.ErrBudgetExceeded
	// ErrNotOwner means a node acted on another node's ENI, addresses or
	// release.
	ErrNotOwner = errs.ErrNotOwner
	// ErrInvalid means a malformed argument.
	ErrInvalid = errs.ErrInvalid
	// ErrWrongState means the record is in a state that does not allow the
	// operation (completing a failed intent, finishing an unacknowledged
	// release). Retrying will not help. (Not in store-api.md; an extra.)
	ErrWrongState = errs.ErrWrongState
)

// BudgetError says which subnet refused a reservation and why; it is
// errs.BudgetError.
type BudgetError = errs.BudgetError

// Store reads and writes the broker's records under one cluster's prefix.
// It is safe for concurrent use.
type Store struct {
	cli    *clientv3.Client
	prefix string

	mu     sync.Mutex
	writes map[string]int64
	leases map[string]lease // by instance id; see KeepAlive
}

// Open uses an existing client; keys live under "/allot/v1/<cluster>/".
func Open(cli *clientv3.Client, cluster string) (*Store, error) {
	if cli == nil {
		return nil, fmt.Errorf("open store: nil etcd client: %w", ErrInvalid)
	}
	if cluster == "" || strings.ContainsAny(cluster, "/ \t\n") {
		return nil, fmt.Errorf("open store: cluster name %q must be non-empty without '/' or spaces: %w", cluster, ErrInvalid)
	}
	return &Store{
		cli:    cli,
		prefix: "/allot/v1/" + cluster + "/",
		writes: map[string]int64{},
		leases: map[string]lease{},
	}, nil
}

// Prefix returns the key prefix of this cluster, ending in "/".
func (s *Store) Prefix() string { return s.prefix }

// Client returns the etcd client the store uses (for leader election).
func (s *Store) Client() *clientv3.Client { return s.cli }

// Writes returns how many etcd write transactions this Store issued, by
// method name. Failed compares count too: they cost a round trip.
func (s *Store) Writes() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.writes))
	for k, v := range s.writes {
		out[k] = v
	}
	return out
}

func (s *Store) countWrite(method string) {
	s.mu.Lock()
	s.writes[method]++
	s.mu.Unlock()
}
