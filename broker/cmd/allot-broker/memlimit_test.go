package main

import (
	"bytes"
	"math"
	"runtime/debug"
	"testing"

	"github.com/allotnet/allot/broker/brokerd"
)

// TestMemoryLimitFlag: --memory-limit takes auto (the default), 0 or a
// size, and refuses anything else.
func TestMemoryLimitFlag(t *testing.T) {
	c, err := parseFlags([]string{"--" + insecureFlag}, &bytes.Buffer{})
	if err != nil || !c.memLimit.auto {
		t.Fatalf("default: %v, %+v; want auto", err, c.memLimit)
	}
	for in, want := range map[string]int64{"0": 0, "450MiB": 450 << 20, "2GiB": 2 << 30, "1048576": 1 << 20, "64 KiB": 64 << 10} {
		c, err := parseFlags([]string{"--memory-limit", in, "--" + insecureFlag}, &bytes.Buffer{})
		if err != nil || c.memLimit.auto || c.memLimit.bytes != want {
			t.Errorf("--memory-limit %q: %v, %+v; want %d bytes", in, err, c.memLimit, want)
		}
	}
	for _, in := range []string{"", "-1", "lots", "1.5GiB", "1TiB", "9000000000GiB"} {
		if _, err := parseFlags([]string{"--memory-limit", in, "--" + insecureFlag}, &bytes.Buffer{}); err == nil {
			t.Errorf("--memory-limit %q accepted", in)
		}
	}
}

// TestMemoryLimitApplied: auto gives the runtime 85% of the container's
// memory limit, keeps GOMEMLIMIT when the environment sets one, and sets
// none without either; an explicit size wins over both.
func TestMemoryLimitApplied(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	noEnv := func(string) string { return "" }
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "300MiB"
		}
		return ""
	}
	container := func() (int64, bool) { return 512 << 20, true }
	none := func() (int64, bool) { return 0, false }
	auto := memoryLimit{auto: true}
	for _, tc := range []struct {
		name     string
		m        memoryLimit
		getenv   func(string) string
		cgroup   func() (int64, bool)
		preset   int64
		want     int64
		wantFrom string
	}{
		{"auto in a 512MiB container", auto, noEnv, container, math.MaxInt64, 456340275, "container memory limit"},
		{"auto with GOMEMLIMIT", auto, env, container, 300 << 20, 300 << 20, "GOMEMLIMIT"},
		{"auto without a container limit", auto, noEnv, none, 100 << 20, math.MaxInt64, "none"},
		{"explicit size", memoryLimit{bytes: 400 << 20}, env, container, 300 << 20, 400 << 20, "--memory-limit"},
		{"explicit none", memoryLimit{}, noEnv, container, 300 << 20, math.MaxInt64, "--memory-limit"},
	} {
		debug.SetMemoryLimit(tc.preset)
		got, from := tc.m.apply(tc.getenv, tc.cgroup)
		if got != tc.want || from != tc.wantFrom || debug.SetMemoryLimit(-1) != tc.want {
			t.Errorf("%s: limit %d from %q (runtime %d), want %d from %q", tc.name, got, from, debug.SetMemoryLimit(-1), tc.want, tc.wantFrom)
		}
	}
}

// TestParseCgroupLimit: "max" and cgroup v1's page-rounded largest value
// are no limit.
func TestParseCgroupLimit(t *testing.T) {
	for in, want := range map[string]int64{"536870912\n": 512 << 20, "max\n": 0, "9223372036854771712\n": 0, "": 0} {
		got, ok := parseCgroupLimit(in)
		if got != want || ok != (want > 0) {
			t.Errorf("parseCgroupLimit(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

// TestGCPercentFlag: --gc-percent defaults to the broker's own setting and
// refuses what is not a positive percentage.
func TestGCPercentFlag(t *testing.T) {
	c, err := parseFlags([]string{"--" + insecureFlag}, &bytes.Buffer{})
	if err != nil || c.gcPercent != brokerd.DefaultGCPercent {
		t.Fatalf("default: %v, %d; want %d", err, c.gcPercent, brokerd.DefaultGCPercent)
	}
	if c, err := parseFlags([]string{"--gc-percent", "100", "--" + insecureFlag}, &bytes.Buffer{}); err != nil || c.gcPercent != 100 {
		t.Errorf("--gc-percent 100: %v, %d", err, c.gcPercent)
	}
	for _, in := range []string{"0", "-1", "off", "1.5"} {
		if _, err := parseFlags([]string{"--gc-percent", in, "--" + insecureFlag}, &bytes.Buffer{}); err == nil {
			t.Errorf("--gc-percent %q accepted", in)
		}
	}
}
