package cniserver_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/agent/cniserver/cniwire"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// wires are the two ways to call the CNI socket; the server tests run on
// both, since both must reach the same handlers with the same results.
var wires = []string{"grpc", "plugin-wire"}

// clientOn returns a CNIService client for socket on wire.
func clientOn(t *testing.T, wire, socket string) allotv1.CNIServiceClient {
	if wire == "grpc" {
		return client(t, socket)
	}
	return wireClient{socket: socket}
}

// wireClient is CNIService over the plugin's wire, with the generated
// types on both ends, and errors as gRPC statuses so one test reads both.
type wireClient struct{ socket string }

var _ allotv1.CNIServiceClient = wireClient{}

func (c wireClient) do(ctx context.Context, m cniwire.Method, in, out proto.Message) error {
	body, err := proto.Marshal(in)
	if err != nil {
		return err
	}
	res, err := cniwire.Call(ctx, c.socket, time.Second, cniwire.Request{Method: m, Body: body})
	if err != nil {
		return status.Error(codes.Code(cniwire.CodeOf(err)), cniwire.MessageOf(err))
	}
	return proto.Unmarshal(res, out)
}

func (c wireClient) Add(ctx context.Context, in *allotv1.CNIRequest, _ ...grpc.CallOption) (*allotv1.CNIAddResult, error) {
	out := &allotv1.CNIAddResult{}
	return out, c.do(ctx, cniwire.MethodAdd, in, out)
}

func (c wireClient) Del(ctx context.Context, in *allotv1.CNIRequest, _ ...grpc.CallOption) (*allotv1.CNIDelResult, error) {
	out := &allotv1.CNIDelResult{}
	return out, c.do(ctx, cniwire.MethodDel, in, out)
}

func (c wireClient) Check(ctx context.Context, in *allotv1.CNIRequest, _ ...grpc.CallOption) (*allotv1.CNICheckResult, error) {
	out := &allotv1.CNICheckResult{}
	return out, c.do(ctx, cniwire.MethodCheck, in, out)
}

func (c wireClient) GC(ctx context.Context, in *allotv1.CNIGCRequest, _ ...grpc.CallOption) (*allotv1.CNIGCResult, error) {
	out := &allotv1.CNIGCResult{}
	return out, c.do(ctx, cniwire.MethodGC, in, out)
}

func (c wireClient) Status(ctx context.Context, in *allotv1.CNIStatusRequest, _ ...grpc.CallOption) (*allotv1.CNIStatusResult, error) {
	out := &allotv1.CNIStatusResult{}
	return out, c.do(ctx, cniwire.MethodStatus, in, out)
}

// TestWireDeadlineIsTheAgents: the plugin's deadline travels with the
// call, so the agent stops working on a call the plugin gave up on, and a
// graceful stop is not held up by it.
func TestWireDeadlineIsTheAgents(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	a := cniservertest.Serve(t, b)
	release := b.Stall("add")
	defer release()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := wireClient{a.Socket}.Add(ctx, addReq("late"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("stalled ADD past its deadline: %v, want DeadlineExceeded", err)
	}
	stopped := make(chan struct{})
	go func() { a.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the agent is still working on a call the plugin gave up on")
	}
}

// TestWireFromAnOlderAgent: an agent serving gRPC alone (older than the
// plugin) closes the plugin's connection; the plugin sees Unavailable, at
// once, and says why.
func TestWireFromAnOlderAgent(t *testing.T) {
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "cni.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	cniserver.New(cniservertest.NewBackend(), nil).Register(g)
	go g.Serve(lis) //nolint:errcheck // returns when stopped
	defer g.Stop()
	start := time.Now()
	_, err = cniwire.Call(t.Context(), sock, 5*time.Second, cniwire.Request{Method: cniwire.MethodStatus})
	if cniwire.CodeOf(err) != cniwire.Unavailable || !strings.Contains(cniwire.MessageOf(err), "older") {
		t.Errorf("plugin wire against a gRPC-only agent: %v, want Unavailable saying the agent may be older", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestWireRefusesBadCalls: a frame that is not a request, an unknown
// method and a body that is not the method's message get an error
// answer, and nothing reaches the backend.
func TestWireRefusesBadCalls(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	a := cniservertest.Serve(t, b)
	raw := func(frame []byte) cniwire.Response {
		c, err := net.Dial("unix", a.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(append([]byte(cniwire.Preamble), frame...)); err != nil {
			t.Fatal(err)
		}
		pre := make([]byte, len(cniwire.Preamble))
		if _, err := c.Read(pre); err != nil || string(pre) != cniwire.Preamble {
			t.Fatalf("preamble %q: %v", pre, err)
		}
		p, err := cniwire.ReadFrame(c)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cniwire.ParseResponse(p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	cases := []struct {
		name  string
		frame []byte
		want  cniwire.Code
	}{
		{"not a request", []byte{0, 0, 0, 1, 0xff}, cniwire.InvalidArgument},
		{"unknown method", cniwire.AppendRequest(nil, cniwire.Request{Method: 99}), cniwire.Unimplemented},
		{"bad body", cniwire.AppendRequest(nil, cniwire.Request{Method: cniwire.MethodAdd, Body: []byte{0x0a, 0x7f}}), cniwire.InvalidArgument},
	}
	for _, tc := range cases {
		if res := raw(tc.frame); res.Code != tc.want {
			t.Errorf("%s: %s %q, want %s", tc.name, res.Code, res.Message, tc.want)
		}
	}
	if n := b.TotalCalls(); n != 0 {
		t.Errorf("bad calls reached the backend %d times", n)
	}
}

// TestWireCarriesTraceContext: the agent's span of a call on the plugin's
// wire is named as gRPC's and is a child of the span the plugin sent.
func TestWireCarriesTraceContext(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prevTP); otel.SetTextMapPropagator(prevProp) })

	a := cniservertest.Serve(t, cniservertest.NewBackend(addrs(1)...))
	ctx, parent := tp.Tracer("test").Start(t.Context(), "plugin")
	hdr := map[string]string{}
	propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(hdr))
	if _, err := cniwire.Call(ctx, a.Socket, time.Second, cniwire.Request{Method: cniwire.MethodStatus, Headers: hdr}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	for _, s := range rec.Ended() {
		if s.Name() == "allot.v1.CNIService/Status" {
			if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
				t.Errorf("agent span's parent %v, want the plugin's %v", s.Parent(), parent.SpanContext())
			}
			return
		}
	}
	t.Errorf("no agent span for the call among %d", len(rec.Ended()))
}

// flakyListener fails its first accepts, as a listener out of file
// descriptors does.
type flakyListener struct {
	net.Listener
	failures int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.failures > 0 {
		l.failures--
		return nil, errors.New("accept4: too many open files")
	}
	return l.Listener.Accept()
}

// TestMuxSurvivesFailedAccepts: a failed accept pauses the socket, it does
// not stop serving it.
func TestMuxSurvivesFailedAccepts(t *testing.T) {
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lis, err := cniserver.Listen(filepath.Join(dir, "cni.sock"))
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv := cniserver.New(cniservertest.NewBackend(addrs(1)...), nil)
	srv.Register(g)
	m := cniserver.NewMux(&flakyListener{Listener: lis, failures: 3}, g, srv)
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	defer m.Stop()
	if _, err := (wireClient{filepath.Join(dir, "cni.sock")}).Status(t.Context(), &allotv1.CNIStatusRequest{}); err != nil {
		t.Fatalf("STATUS after failed accepts: %v", err)
	}
	m.Stop()
	if err := <-served; err != nil {
		t.Errorf("Serve after Stop returned %v, want nil", err)
	}
}
