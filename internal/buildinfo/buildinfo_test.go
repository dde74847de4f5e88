package buildinfo

import (
	"bytes"
	"strings"
	"testing"
)

func TestRequested(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--log-level", "debug"}, false},
		{[]string{"--log-level=debug", "--version"}, true},
		{[]string{"--version=false"}, false},
		{[]string{"budgets", "--version"}, false}, // after a subcommand: the subcommand's business
		{[]string{"--", "--version"}, false},
		{nil, false},
	} {
		if got := Requested(tc.args); got != tc.want {
			t.Errorf("Requested(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestStampedVersionWins(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "v9.8.7", "abc123", "2026-01-02T03:04:05Z"
	var b bytes.Buffer
	if !PrintIfRequested("allot-x", []string{"--version"}, &b) {
		t.Fatal("PrintIfRequested = false for --version")
	}
	got := b.String()
	for _, want := range []string{"allot-x v9.8.7", "commit abc123", "built 2026-01-02T03:04:05Z", "go1."} {
		if !strings.Contains(got, want) {
			t.Errorf("version line %q lacks %q", got, want)
		}
	}
}

func TestUnstampedFieldsAreNeverEmpty(t *testing.T) {
	defer func(v, c, d string) { version, commit, date = v, c, d }(version, commit, date)
	version, commit, date = "", "", ""
	i := Get()
	if i.Version == "" || i.Commit == "" || i.Date == "" {
		t.Fatalf("Get() = %+v: want every field set, \"unknown\" at worst", i)
	}
}
