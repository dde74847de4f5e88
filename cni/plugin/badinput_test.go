package plugin_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
)

// execPlugin runs the plugin binary directly with exactly env and stdin, as
// a broken or hand-driven runtime might, and returns the CNI error it
// printed. It fails the test unless the plugin exited 1 with a JSON error.
func execPlugin(t *testing.T, env []string, stdin string) *types.Error {
	t.Helper()
	cmd := exec.Command(filepath.Join(pluginDir, "allot"))
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("plugin exit: %v, want status 1; stdout %q stderr %q", err, stdout.String(), stderr.String())
	}
	var e types.Error
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
		t.Fatalf("plugin stdout %q is not a CNI error: %v", stdout.String(), err)
	}
	return &e
}

// TestBadInput: every malformed call gets a typed error with the spec's
// code and a message that names the problem, and nothing reaches the agent.
func TestBadInput(t *testing.T) {
	b := cniservertest.NewBackend(addrs(4)...)
	agent := cniservertest.Serve(t, b)
	queueDir := filepath.Join(t.TempDir(), "q")
	conf := func(ver string, extra string) string {
		return `{"cniVersion":"` + ver + `","name":"allot","type":"allot","agentSocket":"` + agent.Socket +
			`","delQueueDir":"` + queueDir + `"` + extra + `}`
	}
	good := conf("1.1.0", "")
	env := func(cmd string, drop string, args string) []string {
		vars := map[string]string{
			"CNI_COMMAND":     cmd,
			"CNI_CONTAINERID": "eeee000000000001",
			"CNI_NETNS":       "/var/run/netns/allot-t-bad",
			"CNI_IFNAME":      "eth0",
			"CNI_PATH":        pluginDir,
			"CNI_ARGS":        args,
		}
		var out []string
		for k, v := range vars {
			if k != drop && v != "" {
				out = append(out, k+"="+v)
			}
		}
		return out
	}
	cases := []struct {
		name  string
		env   []string
		stdin string
		code  uint
		msg   string // must appear in msg or details
	}{
		{"malformed stdin", env("ADD", "", ""), `{"cniVersion": "1.1.0", "name": `, types.ErrDecodingFailure, "unmarshal"},
		{"stdin not an object", env("ADD", "", ""), `["allot"]`, types.ErrDecodingFailure, "unmarshal"},
		{"no network name", env("ADD", "", ""), `{"cniVersion":"1.1.0","type":"allot"}`, types.ErrInvalidNetworkConfig, "missing network name"},
		{"no plugin type", env("ADD", "", ""), `{"cniVersion":"1.1.0","name":"allot"}`, types.ErrInvalidNetworkConfig, "no plugin type"},
		{"missing CNI_COMMAND", env("", "", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_COMMAND"},
		{"unknown CNI_COMMAND", env("FROB", "", ""), good, types.ErrInvalidEnvironmentVariables, "unknown CNI_COMMAND"},
		{"missing CNI_CONTAINERID", env("ADD", "CNI_CONTAINERID", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"missing CNI_IFNAME on DEL", env("DEL", "CNI_IFNAME", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"missing CNI_NETNS on ADD", env("ADD", "CNI_NETNS", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"unsupported cniVersion", env("ADD", "", ""), conf("9.9.9", ""), types.ErrIncompatibleCNIVersion, "9.9.9"},
		{"unsupported old cniVersion", env("ADD", "", ""), conf("0.3.1", ""), types.ErrIncompatibleCNIVersion, "0.3.1"},
		{"GC before 1.1.0", env("GC", "", ""), conf("1.0.0", ""), types.ErrIncompatibleCNIVersion, "GC"},
		{"unknown CNI_ARGS", env("ADD", "", "K8S_POD_NAME=web-0;COLOUR=blue"), good, types.ErrInvalidEnvironmentVariables, "unknown args"},
		{"malformed CNI_ARGS", env("ADD", "", "K8S_POD_NAME"), good, types.ErrInvalidEnvironmentVariables, "invalid pair"},
		{"bad timeout", env("ADD", "", ""), conf("1.1.0", `,"timeout":"soon"`), types.ErrInvalidNetworkConfig, "timeout"},
		{"relative agentSocket", env("ADD", "", ""), `{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"cni.sock"}`, types.ErrInvalidNetworkConfig, "agentSocket"},
		{"GC without valid-attachments", env("GC", "", ""), good, types.ErrInvalidNetworkConfig, "valid-attachments"},
		{"GC with a keyless attachment", env("GC", "", ""), conf("1.1.0", `,"cni.dev/valid-attachments":[{"ifname":"eth0"}]`), types.ErrInvalidNetworkConfig, "containerID"},
		{"CHECK without prevResult", env("CHECK", "", ""), good, types.ErrInvalidNetworkConfig, "prevResult"},
		{"CHECK with a broken prevResult", env("CHECK", "", ""), conf("1.1.0", `,"prevResult":{"ips":[{"address":"not-an-ip"}]}`), types.ErrDecodingFailure, "prevResult"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := execPlugin(t, tc.env, tc.stdin)
			if e.Code != tc.code {
				t.Errorf("code %d (%s), want %d", e.Code, e.Error(), tc.code)
			}
			if !strings.Contains(e.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", e.Error(), tc.msg)
			}
		})
	}
	if n := b.TotalCalls(); n != 0 {
		t.Errorf("bad input reached the agent %d times", n)
	}
	if _, err := os.Stat(queueDir); !os.IsNotExist(err) {
		t.Errorf("bad input queued something: %v", err)
	}
}

// TestUnknownArgsIgnored: with IgnoreUnknown, extra CNI_ARGS keys (as
// runtimes add them) are accepted and the pod name still reaches the agent.
func TestUnknownArgsIgnored(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	agent := cniservertest.Serve(t, b)
	stdin := `{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` + agent.Socket + `"}`
	cmd := exec.Command(filepath.Join(pluginDir, "allot"))
	cmd.Env = []string{
		"CNI_COMMAND=ADD", "CNI_CONTAINERID=ffff000000000001", "CNI_NETNS=/var/run/netns/allot-t-x",
		"CNI_IFNAME=eth0", "CNI_PATH=" + pluginDir,
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=dns-0;COLOUR=blue",
	}
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ADD: %v; stdout %s", err, out)
	}
	reqs := b.Requests("add")
	if len(reqs) != 1 || reqs[0].PodNamespace != "kube-system" || reqs[0].PodName != "dns-0" {
		t.Errorf("agent got %+v, want one ADD for kube-system/dns-0", reqs)
	}
	var res map[string]any
	if err := json.Unmarshal(out, &res); err != nil || res["cniVersion"] != "1.1.0" {
		t.Errorf("stdout %s is not a 1.1.0 result (%v)", out, err)
	}
}
