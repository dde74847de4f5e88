package plugin_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/plugin"
	"github.com/allotnet/allot/cni/plugin/otlp"
	"github.com/allotnet/allot/internal/telemetry/telemetrytest"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// tracedNode is a node whose runtime runs the plugin with tracing on (the
// standard environment, as containerd passes its own), its stderr kept.
func tracedNode(t *testing.T, n *node, endpoint string) *bytes.Buffer {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	var stderr bytes.Buffer
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(),
		&invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: &stderr}, PluginDecoder: version.PluginDecoder{}})
	return &stderr
}

// TestSpansReachTheAgentsCollector: the plugin binary, traced, hands its
// spans to the agent on the socket, and the agent's exporter delivers them
// to its collector: the command's span, service "allot", with the call to
// the agent under it.
func TestSpansReachTheAgentsCollector(t *testing.T) {
	rcv, tr := telemetrytest.AgentTracing(t)
	defer tr.Shutdown(context.Background()) //nolint:errcheck // the test reads the collector, not this
	b := cniservertest.NewBackend(addrs(2)...)
	n := &node{backend: b, agent: cniservertest.ServeSpans(t, b, tr.Forwarder()), queueDir: filepath.Join(t.TempDir(), "q")}
	n.list = loadConflist(t, "1.1.0", n.agent.Socket, n.queueDir)
	stderr := tracedNode(t, n, rcv.Endpoint())
	if _, err := n.cni.AddNetworkList(t.Context(), n.list, pod("c0ffee0000000001", "web-0")); err != nil {
		t.Fatalf("traced ADD: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var root, call telemetrytest.Span
		for _, s := range rcv.Spans() {
			switch {
			case s.Service == "allot" && s.Name == "allot CNI ADD":
				root = s
			case s.Service == "allot" && s.Name == "allot.v1.CNIService/Add":
				call = s
			}
		}
		if root.SpanID != "" && call.SpanID != "" {
			if call.ParentSpanID != root.SpanID || root.Attributes["cni.container_id"] != "c0ffee0000000001" {
				t.Errorf("command %+v, call %+v: want the call under the command", root, call)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector has no plugin ADD and call spans after 20 s: %+v; plugin stderr: %s", rcv.Spans(), stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if stderr.Len() != 0 {
		t.Errorf("plugin wrote to stderr: %s", stderr)
	}
}

// TestTracedAddWithAnAgentThatTakesNoSpans: the plugin's tracing is on but
// the agent exports no traces: the ADD and the DEL succeed, and the plugin
// says on stderr that its spans were dropped, and why.
func TestTracedAddWithAnAgentThatTakesNoSpans(t *testing.T) {
	n := newNode(t, "1.1.0", cniservertest.NewBackend(addrs(2)...))
	stderr := tracedNode(t, n, "http://127.0.0.1:1")
	rt := pod("c0ffee0000000002", "web-1")
	if _, err := n.cni.AddNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("traced ADD, agent without traces: %v", err)
	}
	if err := n.cni.DelNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("traced DEL, agent without traces: %v", err)
	}
	if s := stderr.String(); strings.Count(s, "spans dropped") != 2 || !strings.Contains(s, "exports no traces") {
		t.Errorf("plugin stderr %q, want the dropped spans explained for each call", s)
	}
}

// oldAgent serves the plugin's wire as an agent from before MethodSpans
// does: the CNIService methods answer OK, any other method Unimplemented.
func oldAgent(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "old.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				pre := make([]byte, len(cniwire.Preamble))
				if _, err := io.ReadFull(c, pre); err != nil {
					return
				}
				p, err := cniwire.ReadFrame(c)
				if err != nil {
					return
				}
				req, _ := cniwire.ParseRequest(p)
				res := cniwire.Response{}
				if req.Method > cniwire.MethodStatus {
					res = cniwire.Response{Code: cniwire.Unimplemented, Message: "unknown method " + req.Method.String()}
				}
				_, _ = c.Write(cniwire.AppendResponse([]byte(cniwire.Preamble), res))
			}()
		}
	}()
	return sock
}

// tracedPlugin is the plugin in-process with tracing on.
func tracedPlugin() *plugin.Plugin {
	tr := otlp.New(traceconf.TraceConfig{Endpoint: "http://127.0.0.1:1", Insecure: true, ServiceName: "allot"}, plugin.TraceScope)
	return &plugin.Plugin{Stdout: io.Discard, Stderr: io.Discard, Tracer: tr}
}

// TestSpansToAnOlderAgent: an agent older than the plugin's spans call
// answers STATUS as before; the spans are dropped with an error saying the
// agent is older.
func TestSpansToAnOlderAgent(t *testing.T) {
	sock := oldAgent(t)
	p := tracedPlugin()
	conf := []byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` + sock + `"}`)
	if err := p.Status(&cnispec.CmdArgs{StdinData: conf}); err != nil {
		t.Fatalf("traced STATUS against an older agent: %v", err)
	}
	err := p.FlushSpans(t.Context())
	if err == nil || !strings.Contains(err.Error(), "older than the plugin") {
		t.Errorf("spans to an older agent: %v, want an error saying it is older", err)
	}
}

// TestSpansWhenTheAgentIsDown: a DEL queued because no agent answered
// does not try the agent a second time for its spans.
func TestSpansWhenTheAgentIsDown(t *testing.T) {
	dir := t.TempDir()
	p := tracedPlugin()
	conf := []byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` + filepath.Join(dir, "none.sock") +
		`","delQueueDir":"` + filepath.Join(dir, "q") + `"}`)
	if err := p.Del(&cnispec.CmdArgs{ContainerID: "c0ffee", IfName: "eth0", Netns: "/run/netns/p", StdinData: conf}); err != nil {
		t.Fatalf("traced DEL, agent down: %v", err)
	}
	err := p.FlushSpans(t.Context())
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("spans with the agent down: %v, want them dropped without a second try", err)
	}
}
