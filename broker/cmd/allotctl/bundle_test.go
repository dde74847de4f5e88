package main

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeAgent serves an agent's introspection routes.
func fakeAgent(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	for p, body := range map[string]string{
		"/v1/enis":  `[{"id":"eni-00000001","addresses":[{"addr":"10.0.1.5","state":"assigned"}]}]`,
		"/v1/pods":  `[{"network":"allot","containerID":"c1","ifname":"eth0","addr":"10.0.1.5"}]`,
		"/v1/check": `{"pods":1,"hostVeths":1,"findings":[]}`,
		"/healthz":  `{"ready":true}`,
		"/metrics":  "allot_agent_pool_enis 1\n",
		"/v1/logs":  `{"level":"INFO","msg":"agent ready"}` + "\n",
		"/v1/about": `{"build":{"version":"0.1.0"},"instanceID":"i-00000001","config":{"Mode":"secondary-ip"}}`,
	} {
		mux.HandleFunc("GET "+p, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) })
	}
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// TestSupportBundle writes one tarball holding the broker's answers and
// the agent's introspection, records what the broker refused instead of
// failing, is readable only by its owner, and holds nothing secret.
func TestSupportBundle(t *testing.T) {
	addr := startServer(t)
	agent := fakeAgent(t)
	out := filepath.Join(t.TempDir(), "b.tar.gz")
	code, stdout, errs := ctl(t, "--broker", addr, "support-bundle", "--agents", agent, "--out", out)
	if code != 0 || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("exit %d: %s %s", code, stdout, errs)
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("bundle mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	f, err := os.Open(out)
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
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, "allot-support/")] = string(b)
	}
	dir := "agents/" + strings.ReplaceAll(agent, ":", "_")
	for name, want := range map[string]string{
		"README.txt":          "Nothing secret",
		"version.txt":         "allotctl",
		"broker/status.json":  "nodes",
		"broker/nodes.json":   "i-00000001",
		"broker/enis.json":    "eni-00000001",
		"broker/budgets.json": "subnet-0000000a",
		"errors.txt":          "broker check", // this test broker has no checker
		"broker/logs.jsonl":   `"msg":"allot-broker starting"`,
		dir + "/about.json":   "i-00000001",
		dir + "/enis.json":    "eni-00000001",
		dir + "/pods.json":    "c1",
		dir + "/check.json":   "hostVeths",
		dir + "/healthz.json": "ready",
		dir + "/metrics.txt":  "allot_agent_pool_enis",
	} {
		if !strings.Contains(files[name], want) {
			t.Errorf("%s lacks %q: %q", name, want, files[name])
		}
	}
	for name, body := range files {
		for _, secret := range []string{"PRIVATE KEY", "BEGIN CERTIFICATE", "AKID", "secret"} {
			if strings.Contains(body, secret) && name != "README.txt" {
				t.Errorf("%s holds %q", name, secret)
			}
		}
	}
	// An existing file is never overwritten.
	if code, _, errs := ctl(t, "--broker", addr, "support-bundle", "--out", out); code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("second bundle to the same file: exit %d, %q", code, errs)
	}
}
