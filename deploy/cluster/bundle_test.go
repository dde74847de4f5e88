package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readBundle returns a bundle's files by their name inside it.
func readBundle(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, "allot-support/")] = string(b)
	}
}

// secrets are the key material of a cluster's run: the marker of any PEM
// private key, every base64 line of every key file the broker, the agents
// and allotctl were given, and the agents' repair token.
func secrets(t *testing.T, c *Cluster) []string {
	t.Helper()
	var keys []string
	for _, pattern := range []string{"*.key", "*/*.key", "*/*/*.key"} {
		m, _ := filepath.Glob(filepath.Join(c.Dir, pattern))
		keys = append(keys, m...)
	}
	if len(keys) < 3 {
		t.Fatalf("found %d key files under %s; the test would prove nothing", len(keys), c.Dir)
	}
	out := []string{"PRIVATE KEY"}
	// The agents' repair token, which they write at start.
	if b, err := os.ReadFile(c.RepairTokenFile()); err != nil || len(strings.TrimSpace(string(b))) != 64 {
		t.Fatalf("repair token file %s: %q %v", c.RepairTokenFile(), b, err)
	} else {
		out = append(out, strings.TrimSpace(string(b)))
	}
	t.Logf("key files: %v", keys)
	for _, k := range keys {
		b, err := os.ReadFile(k)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) >= 40 && !strings.HasPrefix(line, "-----") {
				out = append(out, line)
			}
		}
	}
	return out
}

// TestSupportBundles runs allotctl support-bundle (as an admin, and as a
// planner, who may not read the broker's logs) and allot-agent bundle
// against a running cluster: each holds versions, state, check output,
// the agent's configuration and the latest log records of the broker and
// the agents, and no key material of any process.
func TestSupportBundles(t *testing.T) {
	c := startCluster(t, testConfig(t, 1))
	addAll(t, c, 2, 2, "bdl")
	node := c.Nodes[0]
	dir := t.TempDir()

	ctlBundle := func(out string, creds []string) map[string]string {
		args := append(append([]string{"--broker", c.Broker.Addr, "--timeout", "30s"}, creds...),
			"support-bundle", "--agents", node.Agent.Introspect, "--out", out)
		if b, err := exec.Command(c.cfg.Binaries.Ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("allotctl support-bundle: %v\n%s", err, b)
		}
		return readBundle(t, out)
	}
	admin := ctlBundle(filepath.Join(dir, "admin.tar.gz"), c.pki.ctlAdminArgs())
	agentDir := "agents/" + strings.ReplaceAll(node.Agent.Introspect, ":", "_")
	for name, want := range map[string]string{
		"broker/status.json":      "leader",
		"broker/check.json":       "findings",
		"broker/logs.jsonl":       `"msg":"allot-broker starting"`,
		agentDir + "/about.json":  node.InstanceID,
		agentDir + "/pods.json":   "bdl",
		agentDir + "/check.json":  "hostVeths",
		agentDir + "/logs.jsonl":  `"msg":"agent ready"`,
		agentDir + "/metrics.txt": "allot_agent_pool_enis",
		"version.txt":             "allotctl",
	} {
		if !strings.Contains(admin[name], want) {
			t.Errorf("admin's bundle: %s lacks %q (errors: %s)", name, want, admin["errors.txt"])
		}
	}
	planner := ctlBundle(filepath.Join(dir, "planner.tar.gz"), c.pki.ctlArgs())
	if _, ok := planner["broker/logs.jsonl"]; ok || !strings.Contains(planner["errors.txt"], "broker logs") {
		t.Errorf("a planner's bundle holds the broker's logs, or does not say they were refused: %q", planner["errors.txt"])
	}

	out := filepath.Join(dir, "agent.tar.gz")
	cmd := exec.Command(c.cfg.Binaries.Agent, "bundle", "--introspect-addr", node.Agent.Introspect, "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil || !bytes.Contains(b, []byte("0 errors")) {
		t.Fatalf("allot-agent bundle: %v\n%s", err, b)
	}
	agent := readBundle(t, out)
	for name, want := range map[string]string{
		"agent/about.json":   `"CheckpointPath"`,
		"agent/enis.json":    "eni-",
		"agent/pods.json":    "bdl",
		"agent/check.json":   "hostVeths",
		"agent/logs.jsonl":   `"msg":"agent ready"`,
		"agent/healthz.json": "ready",
		"version.txt":        "allot-agent",
	} {
		if !strings.Contains(agent[name], want) {
			t.Errorf("agent's bundle: %s lacks %q", name, want)
		}
	}

	keys := secrets(t, c)
	for bundle, files := range map[string]map[string]string{"admin": admin, "planner": planner, "agent": agent} {
		for name, body := range files {
			for _, s := range keys {
				if strings.Contains(body, s) && name != "README.txt" {
					t.Errorf("%s bundle: %s holds key material (%.20q)", bundle, name, s)
				}
			}
		}
	}
}
