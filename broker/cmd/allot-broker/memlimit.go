package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimit is --memory-limit: the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit). The garbage collector lets the heap grow
// to twice what is live (GOGC=100) unless the limit is nearer; a broker of
// a large cluster holds hundreds of MiB live (every agent's connection, the
// records it follows), so without a limit its RSS is about twice that and a
// container limit kills it. Under the limit the collector runs more often
// as memory nears it: CPU for memory. If what is live alone exceeds the
// limit, the runtime caps the collector near half the CPU instead of
// running it without end, and the process grows past the limit.
type memoryLimit struct {
	auto  bool
	bytes int64 // with !auto; 0: none
}

// autoMemoryFraction is the share of the container's memory limit that
// auto gives the Go runtime: the rest is for what it does not count (the
// embedded etcd's memory-mapped database, the executable).
const autoMemoryFraction = 0.85

func (m *memoryLimit) String() string {
	switch {
	case m.auto:
		return "auto"
	case m.bytes == 0:
		return "0"
	}
	return formatBytes(m.bytes)
}

// Set parses "auto", "0" (none), or a size in bytes with an optional
// KiB, MiB or GiB suffix.
func (m *memoryLimit) Set(s string) error {
	s = strings.TrimSpace(s)
	if s == "auto" {
		*m = memoryLimit{auto: true}
		return nil
	}
	mult := int64(1)
	for suffix, k := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if v, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = v, k
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return errors.New("want auto, 0, or a size such as 450MiB")
	}
	*m = memoryLimit{bytes: n * mult}
	return nil
}

// resolve returns the limit to apply (0: none) and where it comes from.
// An explicit size (or 0) wins; auto keeps GOMEMLIMIT when the
// environment sets it (the runtime has applied it already), else takes a
// share of the container's memory limit, if it has one.
func (m memoryLimit) resolve(getenv func(string) string, container func() (int64, bool)) (int64, string) {
	switch {
	case !m.auto:
		return m.bytes, "--memory-limit"
	case getenv("GOMEMLIMIT") != "":
		return -1, "GOMEMLIMIT"
	}
	if c, ok := container(); ok {
		return int64(float64(c) * autoMemoryFraction), "container memory limit"
	}
	return 0, "none"
}

// apply sets the runtime's soft memory limit as resolved and returns it
// (math.MaxInt64: none) with its source.
func (m memoryLimit) apply(getenv func(string) string, container func() (int64, bool)) (int64, string) {
	n, source := m.resolve(getenv, container)
	switch {
	case n > 0:
		debug.SetMemoryLimit(n)
	case n == 0:
		debug.SetMemoryLimit(1<<63 - 1)
	}
	return debug.SetMemoryLimit(-1), source
}

// parseCgroupLimit reads memory.max or memory.limit_in_bytes: "max", or v1's
// page-rounded largest value, is no limit.
func parseCgroupLimit(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}

func formatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.suffix)
		}
	}
	return strconv.FormatInt(n, 10)
}
