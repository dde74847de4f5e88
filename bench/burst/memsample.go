package burst

import (
	"bufio"
	"context"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemPeaks are the highest values a process's memory figures reached,
// sampled every second: the Go runtime's own (runtime/metrics) and the
// kernel's split of the resident set into anonymous memory (the heap,
// stacks, the runtime's own) and file pages (the executable, and a
// memory-mapped database such as an embedded etcd's bbolt file). Each is
// its own peak; they need not have come at the same moment.
type MemPeaks struct {
	// HeapLive is what the last collection found live (/gc/heap/live).
	HeapLive int64 `json:"heap_live_bytes"`
	// HeapGoal is the heap size at which the next collection starts: live
	// times 1 + GOGC/100, or less under a memory limit.
	HeapGoal int64 `json:"heap_goal_bytes"`
	// Stacks is the memory of goroutine stacks.
	Stacks     int64 `json:"stack_bytes"`
	Goroutines int64 `json:"goroutines"`
	// Mapped is what the runtime holds from the OS and has not released.
	Mapped  int64 `json:"runtime_mapped_bytes"`
	RSSAnon int64 `json:"rss_anon_bytes"`
	RSSFile int64 `json:"rss_file_bytes"`
	// GCCPU is the CPU the garbage collector has used since the process
	// started (/cpu/classes/gc/total, an estimate the runtime keeps) and
	// CPU all the process's Go code and collector together
	// (/cpu/classes/total minus idle); GCCycles the collections. Totals,
	// not peaks: their latest values.
	GCCPU    float64 `json:"gc_cpu_s"`
	CPU      float64 `json:"go_cpu_s"`
	GCCycles int64   `json:"gc_cycles"`
}

// memSampler keeps a process's MemPeaks.
type memSampler struct {
	mu    sync.Mutex
	peaks MemPeaks
}

// run samples every interval until ctx ends.
func (m *memSampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.sample()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// runtimeMetrics are the runtime/metrics names sample reads, in order.
var runtimeMetrics = []string{
	"/gc/heap/live:bytes", "/gc/heap/goal:bytes", "/memory/classes/heap/stacks:bytes",
	"/sched/goroutines:goroutines", "/memory/classes/total:bytes", "/memory/classes/heap/released:bytes",
	"/cpu/classes/gc/total:cpu-seconds", "/cpu/classes/total:cpu-seconds", "/cpu/classes/idle:cpu-seconds",
	"/gc/cycles/total:gc-cycles",
}

func (m *memSampler) sample() {
	s := make([]metrics.Sample, len(runtimeMetrics))
	for i, n := range runtimeMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(s[i].Value.Uint64())
	}
	f := func(i int) float64 {
		if s[i].Value.Kind() != metrics.KindFloat64 {
			return 0
		}
		return s[i].Value.Float64()
	}
	now := MemPeaks{HeapLive: v(0), HeapGoal: v(1), Stacks: v(2), Goroutines: v(3), Mapped: v(4) - v(5),
		GCCPU: f(6), CPU: f(7) - f(8), GCCycles: v(9)}
	st := procStatus("self", "RssAnon:", "RssFile:")
	now.RSSAnon, now.RSSFile = st["RssAnon:"], st["RssFile:"]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peaks = m.peaks.max(now)
}

// Peaks returns the peaks so far.
func (m *memSampler) Peaks() MemPeaks {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peaks
}

func (p MemPeaks) max(q MemPeaks) MemPeaks {
	return MemPeaks{
		HeapLive: max(p.HeapLive, q.HeapLive), HeapGoal: max(p.HeapGoal, q.HeapGoal),
		Stacks: max(p.Stacks, q.Stacks), Goroutines: max(p.Goroutines, q.Goroutines),
		Mapped: max(p.Mapped, q.Mapped), RSSAnon: max(p.RSSAnon, q.RSSAnon), RSSFile: max(p.RSSFile, q.RSSFile),
		GCCPU: max(p.GCCPU, q.GCCPU), CPU: max(p.CPU, q.CPU), GCCycles: max(p.GCCycles, q.GCCycles),
	}
}

// procStatus reads the given "Key:" lines of /proc/<who>/status, in bytes
// (the file gives kB); a key it lacks is absent from the answer.
func procStatus(who string, keys ...string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open("/proc/" + who + "/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, rest, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			continue
		}
		for _, want := range keys {
			if k != want {
				continue
			}
			if fs := strings.Fields(rest); len(fs) > 0 {
				if kb, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
					out[k] = kb << 10
				}
			}
		}
	}
	return out
}
