package introspect

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"

	"github.com/allotnet/allot/internal/telemetry"
)

type fakeSource struct{ h Health }

func (f fakeSource) ENIs() []ENI {
	return []ENI{{ID: "eni-1", MAC: "02:00:00:00:00:01", Primary: true,
		Addresses: []Address{{Addr: "10.0.0.5", State: "assigned", Attachment: "n/c1/eth0"}}}}
}
func (f fakeSource) Pods() []Pod {
	return []Pod{{Network: "n", ContainerID: "c1", IfName: "eth0", Addr: "10.0.0.5"}}
}
func (f fakeSource) Health() Health { return f.h }
func (f fakeSource) Logs() []byte   { return []byte(`{"msg":"agent ready"}` + "\n") }
func (f fakeSource) RepairHost() RepairReport {
	return RepairReport{Restored: []string{"n/c1/eth0"}, Removed: 1}
}
func (f fakeSource) About() About {
	return About{InstanceID: "i-0123456789abcdef0", Config: map[string]string{"mode": "secondary-ip"}}
}
func (f fakeSource) Check() CheckReport {
	return CheckReport{Pods: 1, HostVeths: 2, Findings: []Finding{{Class: "devices-without-pod", HostVeth: "alt1234"}}}
}

// testToken is the repair token serve's server requires.
const testToken = "6c6f6f706261636b2069736e277420616e206964656e7469747920617420616c6c"

func serve(t *testing.T, src Source, m *telemetry.Metrics) string {
	t.Helper()
	return serveWithToken(t, src, m, testToken)
}

func serveWithToken(t *testing.T, src Source, m *telemetry.Metrics, tok string) string {
	t.Helper()
	s, err := Listen("127.0.0.1:0", src, m, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return "http://" + s.Addr()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	m, err := telemetry.NewMetrics()
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Meter("test").Int64Counter("allot.test.things")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 3, metric.WithAttributes())
	base := serve(t, fakeSource{h: Health{Ready: true, BrokerConnected: true}}, m)

	code, body := get(t, base+"/v1/enis")
	var enis []ENI
	if code != 200 || json.Unmarshal([]byte(body), &enis) != nil || len(enis) != 1 || enis[0].Addresses[0].Attachment != "n/c1/eth0" {
		t.Fatalf("/v1/enis: %d %s", code, body)
	}
	code, body = get(t, base+"/v1/pods")
	var pods []Pod
	if code != 200 || json.Unmarshal([]byte(body), &pods) != nil || len(pods) != 1 || pods[0].Addr != "10.0.0.5" {
		t.Fatalf("/v1/pods: %d %s", code, body)
	}
	if code, body = get(t, base+"/v1/logs"); code != 200 || !strings.Contains(body, "agent ready") {
		t.Fatalf("/v1/logs: %d %s", code, body)
	}
	if code, body = get(t, base+"/v1/check"); code != 200 || !strings.Contains(body, `"class": "devices-without-pod"`) {
		t.Fatalf("/v1/check: %d %s", code, body)
	}
	if code, body = get(t, base+"/healthz"); code != 200 || !strings.Contains(body, `"ready": true`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body = get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "allot_test_things_total 3") {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	if code, _ = get(t, base+"/v1/nothing"); code != 404 {
		t.Fatalf("unknown path: %d", code)
	}
}

func TestHealthzNotReady(t *testing.T) {
	base := serve(t, fakeSource{h: Health{Detail: "restoring state"}}, nil)
	if code, body := get(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "restoring") {
		t.Fatalf("/healthz while not ready: %d %s", code, body)
	}
	if code, _ := get(t, base+"/metrics"); code != 404 {
		t.Fatalf("/metrics without metrics: %d", code)
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.0.0.1:61679", "example.com:80"} {
		if _, err := Listen(addr, fakeSource{}, nil, testToken, nil); err == nil {
			t.Errorf("Listen(%q) accepted a non-loopback address", addr)
		}
	}
}

// TestRepairIsAPost: /v1/repair answers a POST with what was repaired, and
// is not reachable by a GET (a crawler or a browser prefetch must not
// change the host).
func TestRepairIsAPost(t *testing.T) {
	base := serve(t, fakeSource{}, nil)
	resp, err := postRepair(base, testToken)
	if err != nil {
		t.Fatal(err)
	}
	var rep RepairReport
	err = json.NewDecoder(resp.Body).Decode(&rep)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || rep.Removed != 1 || len(rep.Restored) != 1 {
		t.Errorf("POST /v1/repair: %s %+v %v", resp.Status, rep, err)
	}
	resp, err = http.Get(base + "/v1/repair")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/repair: %s, want 405", resp.Status)
	}
}
