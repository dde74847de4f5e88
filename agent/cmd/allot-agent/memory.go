package main

import (
	"runtime"
	"runtime/debug"
)

// defaultMemoryLimitMiB is --memory-limit-mib's default: no limit. With
// 110 pods the agent's Go memory in use (live heap, goroutine stacks, the
// runtime's own) stays under 12 MiB even while a runtime deletes every pod
// at once, and the peak it reaches with the pod work limited to a few at a
// time (netslots.go) is the same with or without a soft limit, while a
// limit costs the GC CPU in that burst (0.6 s against 0.4 s). A limit set
// far below the container's memory limit would also turn a larger live set
// into a GC that takes half the node's cores. An admin who wants the
// runtime to give memory back sooner sets it, or GOMEMLIMIT, to about 90%
// of the container's limit.
const defaultMemoryLimitMiB = 0

// defaultGCPercent is --gc-percent's default. The agent's live heap is
// small (about 2 MB with 110 pods) and most of what it allocates is
// garbage at once (each checkpoint write marshals the node's state), so at
// Go's default (100) the heap doubles before each collection and the
// freed pages are kept for the next doubling. At 50 the heap grows by half
// instead: the agent's memory with 110 pods went from about 8 to about 6
// MiB of anonymous pages (docs/benchmarks.md), for a collection about
// twice as often, each well under a millisecond of CPU at this size, and
// about a millisecond more of the agent's time per CNI call under load.
// It scales with the live heap, unlike a fixed limit, so a node with more
// pods pays no more than half its live heap again.
const defaultGCPercent = 50

// setMemory applies the agent's memory settings; main calls it first.
// GOMEMLIMIT and GOGC in the environment, as the Go runtime reads them,
// win over the flags.
func setMemory(limitMiB int, envLimit string, gcPercent int, envGOGC string) {
	// The agent serves no heap profile: sampling allocations for one
	// would only grow the profile's buckets (1.4 MiB after a burst).
	runtime.MemProfileRate = 0
	if envLimit == "" && limitMiB > 0 {
		debug.SetMemoryLimit(int64(limitMiB) << 20)
	}
	if envGOGC == "" {
		debug.SetGCPercent(gcPercent)
	}
}
