package burst

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setNice gives every thread of this process the nice value n. Linux keeps
// a nice value per thread and a new thread takes its creator's, so once
// every thread has n, every thread the Go runtime starts later has it too.
// The walk over /proc/self/task repeats until it finds no thread it has
// not set, for a thread started during the walk by one not yet set.
// n = 0 leaves the process as it started.
func setNice(n int) error {
	if n == 0 {
		return nil
	}
	if n < -20 || n > 19 {
		return fmt.Errorf("nice %d: want -20..19", n)
	}
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("nice: %w", err)
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			// A thread that ended since the read is gone: not an error.
			if err := unix.Setpriority(unix.PRIO_PROCESS, tid, n); err != nil && err != unix.ESRCH {
				return fmt.Errorf("nice %d on thread %d: %w", n, tid, err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}
