package agents

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/deploy/cluster"
)

// PoolConfig is the pool benchmark: the agent's pool alone, in this
// process, with its checkpoint file in Dir, the node's pods replaced
// (DEL, then ADD of a new attachment) by Workers at once.
type PoolConfig struct {
	// Dir holds the checkpoint; default the system temporary directory.
	// It should be on a disk, as /var/lib/allot is on a node: on tmpfs
	// an fsync costs nothing and group commit has nothing to save.
	Dir string
	// Workers are the CNI calls in flight; default 8.
	Workers int
	// Duration of each mode (group commit, each change alone); zero skips
	// the benchmark.
	Duration time.Duration
}

func (c PoolConfig) dir() string {
	if c.Dir == "" {
		return os.TempDir()
	}
	return c.Dir
}

func (c PoolConfig) workers() int {
	if c.Workers <= 0 {
		return 8
	}
	return c.Workers
}

// PoolFigures are one mode's figures.
type PoolFigures struct {
	// Mode is "group-commit" or "each-alone".
	Mode    string `json:"mode"`
	Pods    int    `json:"pods"`
	Workers int    `json:"workers"`
	// Changes are ADDs plus DELs; PerSecond each of them per second
	// (Changes / 2 / Seconds).
	Changes   int     `json:"changes"`
	PerSecond float64 `json:"per_second"`
	// Writes are checkpoint writes; ChangesPerWrite how many changes
	// one write carried on average.
	Writes          int64               `json:"writes"`
	ChangesPerWrite float64             `json:"changes_per_write"`
	WriteMs         cluster.Percentiles `json:"write_ms"`
	Seconds         float64             `json:"seconds"`
	CheckpointFS    string              `json:"checkpoint_fs"`
}

// RunPool runs the pool benchmark in both modes, group commit first.
func RunPool(ctx context.Context, cfg PoolConfig, pods int) ([]PoolFigures, error) {
	var out []PoolFigures
	for _, alone := range []bool{false, true} {
		f, err := runPoolMode(ctx, cfg, pods, alone)
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

// countingStore times every checkpoint write.
type countingStore struct {
	f      *checkpoint.File
	mu     sync.Mutex
	writes []time.Duration
}

func (s *countingStore) Save(st checkpoint.State) error {
	t := time.Now()
	err := s.f.Save(st)
	s.mu.Lock()
	s.writes = append(s.writes, time.Since(t))
	s.mu.Unlock()
	return err
}

func runPoolMode(ctx context.Context, cfg PoolConfig, pods int, alone bool) (PoolFigures, error) {
	f := PoolFigures{Mode: "group-commit", Pods: pods, Workers: cfg.workers()}
	if alone {
		f.Mode = "each-alone"
	}
	dir, err := os.MkdirTemp(cfg.dir(), "allot-poolbench-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "checkpoint.json")
	f.CheckpointFS = mountOf(path)
	store := &countingStore{f: checkpoint.New(path)}
	p, err := pool.New(pool.Config{InstanceID: "i-bench", Cooldown: -1, Store: store, CommitEachAlone: alone},
		checkpoint.State{})
	if err != nil {
		return f, err
	}
	keys, err := fillPool(ctx, p, pods)
	if err != nil {
		return f, err
	}
	store.mu.Lock()
	store.writes = nil
	store.mu.Unlock()
	var changes atomic.Int64
	var seq atomic.Int64
	queue := make(chan pool.Key, len(keys))
	for _, k := range keys {
		queue <- k
	}
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	errc := make(chan error, f.Workers)
	var wg sync.WaitGroup
	for range f.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				k := <-queue
				if _, _, err := p.Del(k); err != nil {
					errc <- err
					return
				}
				nk := benchKey(int(seq.Add(1)) + pods)
				if _, err := p.Add(ctx, nk, pool.PodInfo{PodNamespace: "default", PodName: nk.ContainerID}); err != nil {
					errc <- err
					return
				}
				changes.Add(2)
				queue <- nk
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return f, fmt.Errorf("pool %s: %w", f.Mode, err)
	}
	f.Seconds = time.Since(start).Seconds()
	f.Changes = int(changes.Load())
	f.PerSecond = float64(f.Changes) / 2 / f.Seconds
	store.mu.Lock()
	f.Writes = int64(len(store.writes))
	f.WriteMs = cluster.PercentilesOf(store.writes)
	store.mu.Unlock()
	if f.Writes > 0 {
		f.ChangesPerWrite = float64(f.Changes) / float64(f.Writes)
	}
	return f, nil
}

func benchKey(i int) pool.Key {
	return pool.Key{Network: "allot", ContainerID: fmt.Sprintf("c%08d", i), IfName: "eth0"}
}

// fillPool gives the pool an ENI with enough /28 prefixes for pods plus
// one free prefix, and holds pods attachments.
func fillPool(ctx context.Context, p *pool.Pool, pods int) ([]pool.Key, error) {
	eni := pool.ENI{ID: "eni-bench", MAC: "02:00:00:00:00:01", DeviceIndex: 0, Primary: true, SubnetID: "subnet-bench",
		SubnetCIDR: netip.MustParsePrefix("10.0.0.0/16"), PrimaryIP: netip.MustParseAddr("10.0.0.10")}
	if err := p.AddENI(eni); err != nil {
		return nil, err
	}
	var prefixes []netip.Prefix
	for i := range pods/16 + 2 {
		prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, byte(1 + i/16), byte(i % 16 * 16)}), 28))
	}
	if _, err := p.AddCapacity(eni.ID, nil, prefixes); err != nil {
		return nil, err
	}
	keys := make([]pool.Key, pods)
	for i := range keys {
		keys[i] = benchKey(i)
		if _, err := p.Add(ctx, keys[i], pool.PodInfo{PodNamespace: "default", PodName: keys[i].ContainerID}); err != nil {
			return nil, err
		}
	}
	return keys, nil
}
