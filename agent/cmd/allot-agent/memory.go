package main

import (
	"runtime"
	"runtime/debug"
)

// defaultMemoryLimitMiB is --memory-limit-mib's default. With 110 pods the
// agent's Go memory in use (live heap, goroutine stacks, the runtime's own)
// stays under 12 MiB even while a runtime deletes every pod at once; what
// pushed its peak up was memory already freed that the runtime kept for
// reuse (with GOGC's default the heap may grow to twice what is live, and
// freed pages go back to the kernel only slowly). 16 MiB leaves room above
// the live set, so the limit only changes when the GC runs and how soon it
// returns pages; if the live set ever outgrows it, the GC's CPU is capped
// (at half of GOMAXPROCS) rather than the agent stopping.
const defaultMemoryLimitMiB = 16

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
