package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// probe GETs path on the metrics listener and returns the status code.
func probe(addr, path string) (int, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// wantProbes waits until /healthz and /readyz on addr answer live and
// ready.
func wantProbes(t *testing.T, addr string, live, ready int) {
	t.Helper()
	eventually(t, fmt.Sprintf("/healthz %d and /readyz %d on %s", live, ready, addr), func() error {
		l, err := probe(addr, "/healthz")
		if err != nil {
			return err
		}
		r, err := probe(addr, "/readyz")
		if err != nil {
			return err
		}
		if l != live || r != ready {
			return fmt.Errorf("/healthz %d, /readyz %d", l, r)
		}
		return nil
	})
}

// TestProbesWhileWaitingForQuorum: a member whose peers are not up yet
// (a StatefulSet's first pod, or one restarted while the others are down)
// is alive but not ready. Kubernetes must not restart it for that: the
// restart would not bring the quorum back, only delay the member.
func TestProbesWhileWaitingForQuorum(t *testing.T) {
	sim := emptySim(t)
	sec := newSecure(t, sim)
	metrics := freePort(t)
	var members []string
	for i := range 3 {
		members = append(members, fmt.Sprintf("broker-%d=http://%s", i, freePort(t)))
	}
	p := spawnBroker(t, append(sec.args(t), "--name", "broker-0", "--data-dir", filepath.Join(t.TempDir(), "0"),
		"--etcd-initial-cluster", strings.Join(members, ","), "--etcd-client-url", "http://"+freePort(t),
		"--metrics-addr", metrics, "--ec2-endpoint", sim.EC2Endpoint())...)
	wantProbes(t, metrics, http.StatusOK, http.StatusServiceUnavailable)
	// Still waiting some seconds on: alive, not ready, not serving gRPC.
	time.Sleep(3 * time.Second)
	wantProbes(t, metrics, http.StatusOK, http.StatusServiceUnavailable)
	if servingRe.MatchString(p.logText()) {
		t.Fatalf("serving gRPC without an etcd quorum:\n%s", p.logText())
	}
	_ = p.signal(t, syscall.SIGTERM)
}
