package daemon

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/internal/freeport"
)

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The metrics address serves /metrics and /healthz for a scraper elsewhere
// in the cluster, and nothing that names pods or changes state; it works
// without the loopback introspection.
func TestMetricsAddrServesMetricsOnly(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.IntrospectAddr = ""
	cfg.MetricsAddr = freeAddr(t)
	a := e.start(cfg, hostnettest.NewRecorder())
	e.deliver(a, 2)
	mustAdd(t, a, podReq("p", "c1"))
	base := "http://" + cfg.MetricsAddr

	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics listener never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, want := range []string{`allot_agent_pool_addresses{state="assigned"} 1`, `allot_agent_cni_requests_total{result="ok",verb="add"} 1`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	for path, code := range map[string]int{"/healthz": 200, "/v1/pods": 404, "/v1/enis": 404} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != code {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, code)
		}
	}
	resp, err := http.Post(base+"/metrics", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics: %d", resp.StatusCode)
	}
}
