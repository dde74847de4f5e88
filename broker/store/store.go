package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Errors returned by the store. Compare with errors.Is; the text of the
// wrapping error names the record or key involved.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a compared revision changed under the caller; re-read
	// and retry.
	ErrConflict = errors.New("conflict: record changed concurrently")
	// ErrCorrupt means a stored value does not decode or carries a schema
	// version this code does not understand.
	ErrCorrupt = errors.New("corrupt record")
	// ErrBudgetExceeded is wrapped by *BudgetError.
	ErrBudgetExceeded = errors.New("budget exceeded")
	// ErrNotOwner means a node acted on another node's ENI, addresses or
	// release.
	ErrNotOwner = errors.New("not owner")
	// ErrInvalid means a malformed argument.
	ErrInvalid = errors.New("invalid argument")
	// ErrWrongState means the record is in a state that does not allow the
	// operation (completing a failed intent, finishing an unacknowledged
	// release). Retrying will not help. (Not in store-api.md; an extra.)
	ErrWrongState = errors.New("wrong state")
)

// BudgetError says which subnet refused a reservation and why.
type BudgetError struct {
	SubnetID  string
	Limit     int64
	Use       int64 // Attached + Reserved
	Requested int64
}

// Error reports the subnet, its limit, the current use and the request.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("subnet %s: budget exceeded: limit %d, in use %d, requested %d",
		e.SubnetID, e.Limit, e.Use, e.Requested)
}

// Unwrap returns ErrBudgetExceeded.
func (e *BudgetError) Unwrap() error { return ErrBudgetExceeded }

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
