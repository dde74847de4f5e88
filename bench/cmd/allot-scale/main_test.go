package main

import (
	"slices"
	"testing"
)

// TestBrokerMemoryLimit: --broker-memory-limit reaches the broker's
// process (only it) as GOMEMLIMIT, and a value the runtime would refuse is
// refused before anything starts.
func TestBrokerMemoryLimit(t *testing.T) {
	sp := spawner("/bin/true", "600MiB")
	if env := sp("broker", nil).Env; !slices.Contains(env, "GOMEMLIMIT=600MiB") {
		t.Errorf("the broker's environment lacks GOMEMLIMIT=600MiB: %v", env)
	}
	if env := sp("cloud", nil).Env; env != nil {
		t.Errorf("awssim's environment was changed: %v", env)
	}
	if env := spawner("/bin/true", "")("broker", nil).Env; env != nil {
		t.Errorf("without the flag the broker's environment was changed: %v", env)
	}
	for _, bad := range []string{"lots", "600 MiB", "-1", "1.5GiB"} {
		if code := run([]string{"--broker-memory-limit", bad}); code != 2 {
			t.Errorf("--broker-memory-limit %q: exit %d, want 2", bad, code)
		}
	}
}
