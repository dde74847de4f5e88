package brokerd

import (
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: the broker's setting applies unless the environment
// set GOGC, which then stays as the runtime read it.
func TestSetGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	if got := SetGCPercent(50, ""); got != 50 {
		t.Errorf("no GOGC: in force %d, want 50", got)
	}
	debug.SetGCPercent(80) // as the runtime would have applied GOGC=80
	if got := SetGCPercent(50, "80"); got != 80 {
		t.Errorf("GOGC=80: in force %d, want 80", got)
	}
}
