package cniserver_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/plugin/otlp"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// recordingSink keeps what it is handed, or refuses it with err.
type recordingSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	err   error
}

func (s *recordingSink) Forward(rss []*tracepb.ResourceSpans) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	for _, rs := range rss {
		for _, ss := range rs.GetScopeSpans() {
			s.spans = append(s.spans, ss.GetSpans()...)
		}
	}
	return nil
}

func (s *recordingSink) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sp := range s.spans {
		out = append(out, sp.GetName())
	}
	return out
}

// pluginSpans is what the plugin sends after a command: its two spans,
// encoded by its own package.
func pluginSpans() []byte {
	tr := otlp.New(traceconf.TraceConfig{Endpoint: "http://x:4317", ServiceName: "allot"}, "test")
	root := tr.Start(nil, "allot CNI ADD", otlp.KindClient)
	tr.Start(root, "allot.v1.CNIService/Add", otlp.KindClient).End()
	root.End()
	return tr.Take()
}

// spansCall makes one MethodSpans call.
func spansCall(t *testing.T, socket string, body []byte) error {
	t.Helper()
	_, err := cniwire.Call(t.Context(), socket, 5*time.Second, cniwire.Request{Method: cniwire.MethodSpans, Body: body})
	return err
}

// TestPluginSpansReachTheSink: the plugin's spans, sent on the socket as the
// plugin sends them, are handed to the agent's sink whole.
func TestPluginSpansReachTheSink(t *testing.T) {
	sink := &recordingSink{}
	a := cniservertest.ServeSpans(t, cniservertest.NewBackend(addrs(1)...), sink)
	if err := spansCall(t, a.Socket, pluginSpans()); err != nil {
		t.Fatal(err)
	}
	if got := sink.names(); len(got) != 2 || got[0] != "allot.v1.CNIService/Add" || got[1] != "allot CNI ADD" {
		t.Errorf("sink got %v, want the call's span and the command's", got)
	}
}

// TestSpansWithoutASink: an agent that exports no traces says so, and the
// error is not one a plugin could take for the pod's call failing.
func TestSpansWithoutASink(t *testing.T) {
	a := cniservertest.Serve(t, cniservertest.NewBackend(addrs(1)...))
	err := spansCall(t, a.Socket, pluginSpans())
	if cniwire.CodeOf(err) != cniwire.FailedPrecondition {
		t.Errorf("spans to an agent without traces: %v, want FailedPrecondition", err)
	}
}

// badSpans returns an export request holding n spans, each changed by f.
func badSpans(t *testing.T, n int, f func(*tracepb.Span)) []byte {
	t.Helper()
	ss := &tracepb.ScopeSpans{}
	for i := range n {
		sp := &tracepb.Span{TraceId: make([]byte, 16), SpanId: make([]byte, 8), Name: fmt.Sprint("s", i)}
		if f != nil {
			f(sp)
		}
		ss.Spans = append(ss.Spans, sp)
	}
	b, err := proto.Marshal(&collectortrace.ExportTraceServiceRequest{
		ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{ss}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawCall sends a preamble and then raw bytes, and reads the answer.
func rawCall(socket string, raw []byte) (cniwire.Response, error) {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return cniwire.Response{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append([]byte(cniwire.Preamble), raw...)); err != nil {
		return cniwire.Response{}, err
	}
	pre := make([]byte, len(cniwire.Preamble))
	if _, err := c.Read(pre); err != nil || string(pre) != cniwire.Preamble {
		return cniwire.Response{}, fmt.Errorf("preamble %q: %v", pre, err)
	}
	p, err := cniwire.ReadFrame(c)
	if err != nil {
		return cniwire.Response{}, err
	}
	return cniwire.ParseResponse(p)
}

// TestHostileSpansRefused: spans no plugin sends (too large, not OTLP, too
// many, IDs a collector can't place) and a sink that drops them each get a
// clear error; while such calls, and callers that stall halfway through
// their request, keep coming, ADDs are served as before.
func TestHostileSpansRefused(t *testing.T) {
	sink := &recordingSink{}
	a := cniservertest.ServeSpans(t, cniservertest.NewBackend(addrs(64)...), sink)
	cases := []struct {
		name string
		body []byte
		want cniwire.Code
	}{
		{"larger than MaxSpans", make([]byte, cniwire.MaxSpans+1), cniwire.ResourceExhausted},
		{"not protobuf", []byte{0x0a, 0xff, 0xff, 0xff, 0x7f}, cniwire.InvalidArgument},
		{"too many spans", badSpans(t, 17, nil), cniwire.InvalidArgument},
		{"short trace ID", badSpans(t, 1, func(s *tracepb.Span) { s.TraceId = s.TraceId[:4] }), cniwire.InvalidArgument},
		{"long parent ID", badSpans(t, 1, func(s *tracepb.Span) { s.ParentSpanId = make([]byte, 9) }), cniwire.InvalidArgument},
		{"no name", badSpans(t, 1, func(s *tracepb.Span) { s.Name = "" }), cniwire.InvalidArgument},
	}
	for _, tc := range cases {
		if err := spansCall(t, a.Socket, tc.body); cniwire.CodeOf(err) != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
	}
	// A frame past the wire's bound: the length alone is refused.
	var huge [4]byte
	binary.BigEndian.PutUint32(huge[:], cniwire.MaxFrame+1)
	if res, err := rawCall(a.Socket, huge[:]); err != nil || res.Code != cniwire.ResourceExhausted {
		t.Errorf("frame of MaxFrame+1 bytes: %v %+v, want ResourceExhausted", err, res)
	}
	if n := len(sink.names()); n != 0 {
		t.Errorf("%d refused spans reached the sink", n)
	}
	sink.mu.Lock()
	sink.err = errors.New("queue full")
	sink.mu.Unlock()
	if err := spansCall(t, a.Socket, pluginSpans()); cniwire.CodeOf(err) != cniwire.ResourceExhausted {
		t.Errorf("spans the sink drops: %v, want ResourceExhausted", err)
	}

	// ADDs while hostile callers keep the socket busy.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if i == 0 {
					// Half a request, then silence, until the agent gives up.
					c, err := net.Dial("unix", a.Socket)
					if err == nil {
						_, _ = c.Write(append([]byte(cniwire.Preamble), 0, 1, 0, 0, 1))
						<-stop
						c.Close()
					}
					continue
				}
				_ = spansCall(t, a.Socket, cases[i%len(cases)].body)
			}
		})
	}
	c := wireClient{a.Socket}
	start := time.Now()
	for i := range 20 {
		if _, err := c.Add(t.Context(), addReq(fmt.Sprint("pod", i))); err != nil {
			t.Errorf("ADD %d beside hostile spans calls: %v", i, err)
		}
	}
	d := time.Since(start)
	close(stop)
	wg.Wait()
	// Generous for a loaded 2-core machine; what matters is that no ADD
	// waits behind the stalled caller's 10 s.
	if d > 8*time.Second {
		t.Errorf("20 ADDs beside hostile spans calls took %v", d)
	}
}
