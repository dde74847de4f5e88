package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
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

// WriteMark holds the revision of the latest write made with a context
// that carries it (WithWriteMark): one writer's own last write. A reader
// following the prefix (Follow) that has reached it sees every write that
// writer made so far.
type WriteMark struct{ rev atomic.Int64 }

// Rev returns the revision of the latest write marked (0 before one).
func (m *WriteMark) Rev() int64 { return m.rev.Load() }

type writeMarkKey struct{}

// WithWriteMark makes every write committed with ctx (or a context made
// from it) raise m to its revision.
func WithWriteMark(ctx context.Context, m *WriteMark) context.Context {
	return context.WithValue(ctx, writeMarkKey{}, m)
}

func (s *Store) noteWrite(ctx context.Context, rev int64) {
	if m, ok := ctx.Value(writeMarkKey{}).(*WriteMark); ok {
		for {
			cur := m.rev.Load()
			if cur >= rev || m.rev.CompareAndSwap(cur, rev) {
				break
			}
		}
	}
}

func (s *Store) countWrite(method string) {
	s.mu.Lock()
	s.writes[method]++
	s.mu.Unlock()
}
