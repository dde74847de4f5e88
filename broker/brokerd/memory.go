package brokerd

import (
	"runtime/debug"
	"runtime/metrics"
)

// DefaultGCPercent is the broker's garbage collector setting (GOGC) when
// the environment sets none: Go's own default. The collector lets the heap
// grow by what is live plus every goroutine's stack before it runs again,
// and a broker of thousands of nodes holds hundreds of MiB of both (every
// agent's connection keeps four goroutines and their gRPC and TLS state),
// so a lower setting saves memory in proportion: at 1,000 nodes 50 took
// the broker's peak RSS from 369 to 274 MiB, for about a fifth more CPU
// (docs/benchmarks.md, "Where the broker's memory goes at 5,000 nodes").
// At thousands of nodes the broker's CPU is what its planning rounds wait
// for, so the default spends none of it on memory; --gc-percent and
// --memory-limit trade one for the other where memory is short.
const DefaultGCPercent = 100

// SetGCPercent sets the collector's GOGC to pct unless envGOGC, the
// environment's GOGC as the runtime read it, is set: then that stays. It
// returns the setting in force.
func SetGCPercent(pct int, envGOGC string) int {
	if envGOGC == "" {
		debug.SetGCPercent(pct)
	}
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return pct
	}
	return int(s[0].Value.Uint64())
}
