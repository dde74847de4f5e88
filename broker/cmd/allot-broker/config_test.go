package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/allotnet/allot/broker/planner"
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
	c, err := parseFlags([]string{"--time-scale", "10", "--" + insecureFlag}, &bytes.Buffer{})
	if err != nil || c.timeScale != 10 {
		t.Errorf("--time-scale 10: %v, scale %g", err, c.timeScale)
	}
	if _, err := parseFlags([]string{"--time-scale", "0", "--" + insecureFlag}, &bytes.Buffer{}); err == nil {
		t.Error("--time-scale 0 accepted")
	}
}

// TestSecureByDefault: without TLS the broker refuses to start unless the
// insecure flag is named, which in turn refuses to be mixed with TLS; with
// TLS, some way to authenticate is required.
func TestSecureByDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" accepts
	}{
		{nil, "refusing to start without TLS"},
		{[]string{"--ec2-endpoint", "http://127.0.0.1:1"}, "refusing to start without TLS"},
		{[]string{"--" + insecureFlag}, ""},
		{[]string{"--" + insecureFlag, "--tls-cert", "c", "--tls-key", "k"}, "serves anyone in plaintext"},
		{[]string{"--" + insecureFlag, "--identity-cert", "id.pem"}, "serves anyone in plaintext"},
		{[]string{"--tls-cert", "c", "--tls-key", "k"}, "no caller could authenticate"},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--identity-cert", "id.pem"}, ""},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--tls-client-ca", "ca.pem"}, ""},
		{[]string{"--tls-cert", "c", "--tls-key", "k", "--identity-cert", "id.pem", "--node-token-ttl", "5s"}, "node-token-ttl"},
	} {
		_, err := parseFlags(tc.args, &bytes.Buffer{})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestPlanPolicyFlag: time-optimal by default, fewest-calls on request, and
// anything else refused with the choices named.
func TestPlanPolicyFlag(t *testing.T) {
	c, err := parseFlags([]string{"--" + insecureFlag}, &bytes.Buffer{})
	if err != nil || c.planPolicy != planner.TimeOptimal {
		t.Errorf("default: %v, policy %v; want time-optimal", err, c.planPolicy)
	}
	c, err = parseFlags([]string{"--" + insecureFlag, "--plan-policy", "fewest-calls"}, &bytes.Buffer{})
	if err != nil || c.planPolicy != planner.FewestCalls {
		t.Errorf("--plan-policy fewest-calls: %v, policy %v", err, c.planPolicy)
	}
	_, err = parseFlags([]string{"--" + insecureFlag, "--plan-policy", "fastest"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "time-optimal or fewest-calls") {
		t.Errorf("--plan-policy fastest: %v, want the choices named", err)
	}
}
