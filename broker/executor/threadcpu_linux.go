package executor

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time the calling thread has run, and whether the
// system gives it. The engine's loop holds its goroutine to one thread
// (Engine.Run), so the difference of two readings within a round is the
// processor time the round itself ran, its garbage collection assists
// included, without the time it waited for a core.
func threadCPU() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
