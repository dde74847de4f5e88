package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestTimeScaleHiddenButAccepted: --time-scale serves only a simulator, so
// --help does not list it; it still parses and is checked.
func TestTimeScaleHiddenButAccepted(t *testing.T) {
	var help bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	if strings.Contains(help.String(), "time-scale") || !strings.Contains(help.String(), "-bucket-share") {
		t.Errorf("--help lists time-scale or lacks the other flags:\n%s", help.String())
	}
	c, err := parseFlags([]string{"--time-scale", "10"}, &bytes.Buffer{})
	if err != nil || c.timeScale != 10 {
		t.Errorf("--time-scale 10: %v, scale %g", err, c.timeScale)
	}
	if _, err := parseFlags([]string{"--time-scale", "0"}, &bytes.Buffer{}); err == nil {
		t.Error("--time-scale 0 accepted")
	}
}
