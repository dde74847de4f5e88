package logfmt

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"
)

func parse(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Register(fs, "info")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Parse()
}

func TestJSONLinesParse(t *testing.T) {
	o, err := parse(t, "--log-format", "json", "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	New(&b, o).Debug("pool low", "node", "i-1", "free", 3)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("json log line %q: %v", b.String(), err)
	}
	if rec["msg"] != "pool low" || rec["node"] != "i-1" || rec["free"] != float64(3) || rec["level"] != "DEBUG" {
		t.Fatalf("json log record = %v", rec)
	}
}

func TestTextIsDefaultAndLevelFilters(t *testing.T) {
	o, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	l := New(&b, o)
	l.Debug("hidden")
	l.Info("shown", "k", "v")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "msg=shown k=v") {
		t.Fatalf("text log = %q", s)
	}
}

func TestBadValuesAreErrors(t *testing.T) {
	if _, err := parse(t, "--log-format", "yaml"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Fatalf("--log-format yaml: err = %v", err)
	}
	if _, err := parse(t, "--log-level", "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Fatalf("--log-level loud: err = %v", err)
	}
}
