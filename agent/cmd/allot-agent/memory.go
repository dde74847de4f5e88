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

// setMemory applies the agent's memory settings; main calls it first.
// GOMEMLIMIT in the environment, as the Go runtime reads it, wins over the
// flag.
func setMemory(limitMiB int, envLimit string) {
	// The agent serves no heap profile: sampling allocations for one
	// would only grow the profile's buckets (1.4 MiB after a burst).
	runtime.MemProfileRate = 0
	if envLimit == "" && limitMiB > 0 {
		debug.SetMemoryLimit(int64(limitMiB) << 20)
	}
}
