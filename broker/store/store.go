package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store reads and writes the broker's records under one cluster's prefix.
// It is safe for concurrent use.
type Store struct {
	cli    *clientv3.Client
	prefix string

	mu     sync.Mutex
	writes map[string]int64
	live   liveness // see KeepAlive
	// lastWrite is the revision of this Store's latest committed write
	// transaction under the prefix.
	lastWrite int64
}

// Open uses an existing client; keys live under "/allot/v1/<cluster>/".
func Open(cli *clientv3.Client, cluster string) (*Store, error) {
	if cli == nil {
		return nil, fmt.Errorf("open store: nil etcd client: %w", rpcerr.ErrInvalid)
	}
	if cluster == "" || strings.ContainsAny(cluster, "/ \t\n") {
		return nil, fmt.Errorf("open store: cluster name %q must be non-empty without '/' or spaces: %w", cluster, rpcerr.ErrInvalid)
	}
	return &Store{
		cli:    cli,
		prefix: "/allot/v1/" + cluster + "/",
		writes: map[string]int64{},
		live:   liveness{groups: map[time.Duration]*liveGroup{}},
	}, nil
}

// Prefix returns the key prefix of this cluster, ending in "/".
func (s *Store) Prefix() string { return s.prefix }

// Revision returns etcd's current revision with the cheapest read there
// is: one key that never exists.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"server/revision-probe")
	if err != nil {
		return 0, fmt.Errorf("read etcd revision: %w", err)
	}
	return resp.Header.Revision, nil
}

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

// LastWrite returns the etcd revision of this Store's latest committed
// write under the cluster prefix (0 before the first). A reader following
// the prefix (Follow) that has reached it sees every write made through
// this Store so far.
func (s *Store) LastWrite() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastWrite
}

func (s *Store) noteWrite(rev int64) {
	s.mu.Lock()
	s.lastWrite = max(s.lastWrite, rev)
	s.mu.Unlock()
}

func (s *Store) countWrite(method string) {
	s.mu.Lock()
	s.writes[method]++
	s.mu.Unlock()
}
