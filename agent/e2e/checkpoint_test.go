package e2e_test

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestCorruptCheckpoint: allot-agent started on a checkpoint whose first
// record is truncated, that is empty, not JSON, fails its checksum or has
// an unknown version refuses to start with an error naming the checkpoint,
// and leaves the file as it found it; nothing is freed meanwhile (EC2, the
// broker and the pods' networks are untouched) and STATUS tells the runtime
// the plugin can't serve. With the good file back — ending in a torn
// record, as a crash while appending leaves it — it starts, says it dropped
// the torn record, and every pod is as before.
func TestCorruptCheckpoint(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 5, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, 2*time.Minute)
	pods := newPods(t, "ckpt", 3)
	addrs := addAll(t, ctx, env.Runtime, pods, 3)
	env.Agent.Kill9()

	path := env.Agent.Config.Checkpoint
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ec2Before := env.Cloud.Assigned(t)
	brokerBefore := env.Broker.Records(t)
	oneAddr := addrs[pods[0]].String()
	if !bytes.Contains(good, []byte(`"`+oneAddr+`"`)) || !bytes.Contains(good, []byte(`"version":1`)) {
		t.Fatalf("checkpoint does not look as expected (no %q or version 1):\n%s", oneAddr, good)
	}
	cases := []struct {
		name    string
		content []byte
		reason  string // the agent's error must say this
	}{
		// The first record is written whole or not at all, so one cut
		// short is corruption, not a torn append.
		{"truncated", good[:bytes.IndexByte(good, '\n')/2], "corrupt"},
		{"empty", nil, "empty"},
		{"not JSON", []byte("this is not a checkpoint\n"), "corrupt"},
		// Still valid JSON, one pod's address changed: only the checksum
		// can tell.
		{"checksum mismatch", bytes.Replace(good, []byte(`"`+oneAddr+`"`), []byte(`"10.0.15.250"`), 1), "checksum"},
		{"unknown version", bytes.Replace(good, []byte(`"version":1`), []byte(`"version":99`), 1), "version 99"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatal(err)
			}
			before := len(env.Agent.Log())
			env.Agent.Start()
			st := env.Agent.Exited(20 * time.Second)
			if st == nil {
				env.Agent.Stop()
				t.Fatalf("allot-agent kept running on a %s checkpoint", tc.name)
			}
			if st.Success() {
				t.Errorf("allot-agent exited successfully on a %s checkpoint", tc.name)
			}
			out := env.Agent.Log()[before:]
			failure := errorLines(out)
			if !strings.Contains(failure, path) || !strings.Contains(failure, tc.reason) {
				t.Errorf("the agent's error does not name the checkpoint %s and %q:\n%s", path, tc.reason, out)
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, tc.content) {
				t.Errorf("the agent changed the %s checkpoint file", tc.name)
			}
			err := env.Runtime.Status(ctx)
			if code := cniCode(err); code != types.ErrPluginNotAvailable {
				t.Errorf("STATUS while the agent refuses to start: %v (code %d), want 50", err, code)
			}
			t.Logf("agent said: %s", failure)
		})
	}

	assertNothingReleased(t, "EC2", ec2Before, env.Cloud.Assigned(t))
	assertNothingReleased(t, "broker", brokerBefore, env.Broker.Records(t))
	verifyWired(t, env, addrs) // pods kept their network while the agent was down

	lines := bytes.SplitAfter(good, []byte("\n"))
	last := lines[len(lines)-2] // the last record, before the final empty split
	torn := append(bytes.Clone(good), last[:len(last)/2]...)
	if err := os.WriteFile(path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(env.Agent.Log())
	env.Agent.Start()
	env.Agent.WaitReady(t, 30*time.Second)
	if !strings.Contains(env.Agent.Log()[before:], "torn record, dropped") {
		t.Errorf("the agent did not say it dropped the torn record:\n%s", env.Agent.Log()[before:])
	}
	want := harness.Records{}
	for p, a := range addrs {
		want[harness.Key(harness.Network, p)] = a
		if err := env.Runtime.Check(ctx, p); err != nil {
			t.Errorf("CHECK %s after the good checkpoint is back: %v", p, err)
		}
	}
	for _, d := range harness.Diff("restored", agreement(t, ctx, env), "before", want) {
		t.Error(d)
	}
}

// errorLines are the error-level lines of an agent's log.
func errorLines(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
