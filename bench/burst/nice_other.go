//go:build !linux

package burst

import "errors"

// setNice is Linux's only: elsewhere a process's nice value is not kept
// per thread the same way, and the benchmark runs on Linux.
func setNice(n int) error {
	if n == 0 {
		return nil
	}
	return errors.New("nice: only on Linux")
}
