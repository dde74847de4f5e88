package daemon

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/hostnet"
	"github.com/allotnet/allot/agent/hostnet/hostnettest"
	"github.com/allotnet/allot/agent/introspect"
	"github.com/allotnet/allot/cni/delqueue"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Run serves the CNI socket (mode 0600) and introspection, and replays a
// DEL the plugin queued while the agent was down before it serves.
func TestRunServesSocketIntrospectionAndReplaysQueue(t *testing.T) {
	e := newEnv(t)
	first := e.start(e.config(), hostnettest.NewRecorder())
	e.deliver(first, 3)
	mustAdd(t, first, podReq("queued", "old"))
	mustAdd(t, first, podReq("kept", "new"))
	first.stop()
	// The stopped agent left its checkpoint as one whole record, which an
	// agent of an older version reads too.
	if b, err := os.ReadFile(e.config().CheckpointPath); err != nil || bytes.Count(b, []byte("\n")) != 1 ||
		!bytes.Contains(b, []byte(`"state":`)) {
		t.Fatalf("checkpoint after a stop: %d records, err %v, want one whole state", bytes.Count(b, []byte("\n")), err)
	}

	// While the agent is down the plugin queues the DEL of "queued".
	sockDir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	queue := filepath.Join(e.dir, "del-queue")
	r := podReq("queued", "old")
	if _, err := delqueue.Write(queue, delqueue.Entry{Network: r.Attachment.Network, ContainerID: r.Attachment.ContainerID,
		IfName: r.Attachment.IfName, NetNS: r.NetNS, QueuedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	cfg := e.config()
	cfg.SocketPath = filepath.Join(sockDir, "cni.sock")
	cfg.IntrospectAddr = "127.0.0.1:0"
	cfg.DelQueueDir = queue
	a := e.start(cfg, hostnettest.NewRecorder())
	if _, ok := a.Pool().Get(keyOf(r.Attachment)); ok {
		t.Fatal("queued DEL not replayed on start")
	}
	if left, _ := delqueue.List(queue); len(left) != 0 {
		t.Fatalf("queue still holds %v", left)
	}

	waitFile(t, cfg.SocketPath)
	fi, err := os.Stat(cfg.SocketPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	conn, err := grpc.NewClient("unix://"+cfg.SocketPath, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cni := allotv1.NewCNIServiceClient(conn)
	res, err := cni.Add(ctxT(t), &allotv1.CNIRequest{
		Attachment: &allotv1.Attachment{Network: "allot", ContainerId: "via-socket", Ifname: "eth0"},
		Netns:      "/var/run/netns/cni-via-socket", CniVersion: "1.1.0",
	})
	if err != nil {
		t.Fatalf("ADD over the socket: %v", err)
	}
	if !strings.HasSuffix(res.GetAddress(), "/32") || res.GetGateway() != hostnet.PodGateway.String() {
		t.Fatalf("ADD over the socket: %v", res)
	}
	_, err = cni.Check(ctxT(t), &allotv1.CNIRequest{
		Attachment: &allotv1.Attachment{Network: "allot", ContainerId: "nobody", Ifname: "eth0"},
		Netns:      "/var/run/netns/x",
	})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("CHECK of an unknown attachment over the socket: %v, want NotFound", err)
	}

	// Introspection: the addr is the bound one, learnt from the log-free
	// Source the agent serves; ask the handler directly through HTTP.
	srv := newIntrospectServer(t, a)
	var pods []introspect.Pod
	getJSON(t, srv+"/v1/pods", &pods)
	if len(pods) != 2 {
		t.Fatalf("/v1/pods lists %d pods, want 2 (kept, via-socket): %+v", len(pods), pods)
	}
	var enis []introspect.ENI
	getJSON(t, srv+"/v1/enis", &enis)
	if len(enis) != 1 || !enis[0].Primary || len(enis[0].Addresses) != 3 {
		t.Fatalf("/v1/enis: %+v", enis)
	}
	var h introspect.Health
	getJSON(t, srv+"/healthz", &h)
	if !h.Ready {
		t.Fatalf("/healthz: %+v", h)
	}
	body := get(t, srv+"/metrics")
	for _, want := range []string{`allot_agent_pool_addresses{state="assigned"} 2`, `allot_agent_cni_requests_total{result="ok",verb="add"}`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// newIntrospectServer serves the agent's introspection on a fresh loopback
// port (the agent's own listener's port is not exported).
func newIntrospectServer(t *testing.T, a *agentRun) string {
	t.Helper()
	s, err := introspect.Listen("127.0.0.1:0", a.source(), a.metrics, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Shutdown(ctxT(t)) })
	return "http://" + s.Addr()
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, url)), v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
