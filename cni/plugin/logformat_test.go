package plugin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/plugin"
)

// TestLogFormat: the netconf's logFormat is how the plugin writes to the
// runtime's stderr — one JSON object a line with "json" (here the warning
// of a DEL queued while the agent is down) — and a value other than text
// or json is a config error (7) naming the key.
func TestLogFormat(t *testing.T) {
	dir := t.TempDir()
	conf := func(format string) []byte {
		return []byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` +
			filepath.Join(dir, "no-agent.sock") + `","delQueueDir":"` + filepath.Join(dir, "q") + `","logFormat":"` + format + `"}`)
	}
	args := func(format string) *cnispec.CmdArgs {
		return &cnispec.CmdArgs{ContainerID: "c0ffee", IfName: "eth0", Netns: "/run/netns/p", StdinData: conf(format)}
	}

	var stderr bytes.Buffer
	p := &plugin.Plugin{Stdout: io.Discard, Stderr: &stderr}
	if err := p.Del(args("json")); err != nil {
		t.Fatalf("DEL with the agent down and a queue: %v", err)
	}
	var rec map[string]any
	if err := json.Unmarshal(stderr.Bytes(), &rec); err != nil {
		t.Fatalf("stderr is not one JSON record: %v\n%s", err, stderr.Bytes())
	}
	if msg, _ := rec["msg"].(string); !strings.Contains(msg, "DEL queued") || rec["level"] != "WARN" {
		t.Errorf("record %v, want the queued DEL's warning", rec)
	}

	stderr.Reset()
	err := p.Del(args("yaml"))
	var te *cnispec.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, "logFormat") {
		t.Errorf("logFormat yaml: %v, want a config error naming logFormat", err)
	}
}
