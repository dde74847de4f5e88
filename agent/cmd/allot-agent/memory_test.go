package main

import (
	"io"
	"runtime/debug"
	"strings"
	"testing"
)

// The agent's collector runs at --gc-percent, 50 unless told otherwise;
// GOGC in the environment wins, as it does for any Go program.
func TestGCPercent(t *testing.T) {
	base := []string{"--imds-endpoint=http://127.0.0.1:1", "--broker=b:1"}
	c, err := parseFlags(base, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	setMemory(c.memoryLimitMiB, "", c.gcPercent, "")
	if got := debug.SetGCPercent(100); got != 50 {
		t.Fatalf("GC percent %d by default, want 50", got)
	}
	debug.SetGCPercent(77) // as the runtime would have set it from GOGC=77
	setMemory(0, "", c.gcPercent, "77")
	if got := debug.SetGCPercent(100); got != 77 {
		t.Fatalf("GC percent %d with GOGC=77 set, want the environment's left alone", got)
	}
	c, err = parseFlags(append(base, "--gc-percent=200"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	setMemory(0, "", c.gcPercent, "")
	if got := debug.SetGCPercent(100); got != 200 {
		t.Fatalf("GC percent %d with --gc-percent=200", got)
	}
	for _, bad := range []string{"--gc-percent=0", "--gc-percent=-2"} {
		if _, err := parseFlags(append(base, bad), io.Discard); err == nil || !strings.Contains(err.Error(), "--gc-percent") {
			t.Errorf("parseFlags(%s) = %v, want an error naming --gc-percent", bad, err)
		}
	}
}
