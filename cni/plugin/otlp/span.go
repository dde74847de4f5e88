// Package otlp records the CNI plugin's spans and encodes them as OTLP,
// without the OpenTelemetry SDK.
//
// The plugin is executed once per CNI command and makes two spans: the
// command's, and its call to the agent under it. Linking the SDK and its
// gRPC exporter cost every exec their package initialisation (and a
// binary a third larger), traced or not; so did an exporter of the
// plugin's own, through crypto/tls and crypto/x509. This package makes
// those two spans, samples them as the SDK's samplers would for a root
// span, and encodes them as one OTLP ExportTraceServiceRequest (Take); the
// plugin hands that to the agent on its socket, and the agent exports it
// to its collector with its own exporter. It links nothing beyond the
// standard library and internal/pbwire.
package otlp

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// Kind is a span's kind, with OTLP's numbers.
type Kind int

// The kinds the plugin makes.
const (
	KindServer Kind = 2
	KindClient Kind = 3
)

// Tracer makes spans and hands the ended ones out, encoded, on Take.
type Tracer struct {
	cfg   traceconf.TraceConfig
	scope string

	mu    sync.Mutex
	ended []*Span
}

// New returns a Tracer for cfg (which must be enabled); scope names the
// instrumentation scope of its spans.
func New(cfg traceconf.TraceConfig, scope string) *Tracer {
	return &Tracer{cfg: cfg, scope: scope}
}

// Span is one span. Its methods are safe on a nil *Span (tracing off).
type Span struct {
	t        *Tracer
	traceID  [16]byte
	spanID   [8]byte
	parentID [8]byte
	sampled  bool
	name     string
	kind     Kind
	start    time.Time
	end      time.Time
	attrs    [][2]string
	errMsg   string
}

// Start starts a span: a root when parent is nil, else parent's child.
// attrs are key, value pairs.
func (t *Tracer) Start(parent *Span, name string, kind Kind, attrs ...string) *Span {
	s := &Span{t: t, name: name, kind: kind, start: time.Now()}
	if parent != nil {
		s.traceID, s.parentID, s.sampled = parent.traceID, parent.spanID, parent.sampled
	} else {
		// Trace and span IDs need to be unique, not secret: the runtime's
		// generator (seeded from the kernel for each process) is enough,
		// as it is for the SDK's, and crypto/rand would cost every exec
		// its initialisation.
		binary.BigEndian.PutUint64(s.traceID[:8], rand.Uint64())
		binary.BigEndian.PutUint64(s.traceID[8:], rand.Uint64())
		s.sampled = t.sample(s.traceID)
	}
	binary.BigEndian.PutUint64(s.spanID[:], rand.Uint64())
	for i := 0; i+1 < len(attrs); i += 2 {
		s.attrs = append(s.attrs, [2]string{attrs[i], attrs[i+1]})
	}
	return s
}

// sample decides for a root span as the configured SDK sampler would.
func (t *Tracer) sample(id [16]byte) bool {
	switch t.cfg.Sampler {
	case "always_off", "parentbased_always_off":
		return false
	case "traceidratio", "parentbased_traceidratio":
		// The SDK's TraceIDRatioBased: the trace ID's low 63 bits against
		// the ratio of 2^63.
		x := binary.BigEndian.Uint64(id[8:16]) >> 1
		return x < uint64(t.cfg.SamplerArg*math.Exp2(63))
	}
	return true
}

// Traceparent is the span's W3C trace context, for the agent.
func (s *Span) Traceparent() string {
	if s == nil {
		return ""
	}
	flags := "00"
	if s.sampled {
		flags = "01"
	}
	return "00-" + hex.EncodeToString(s.traceID[:]) + "-" + hex.EncodeToString(s.spanID[:]) + "-" + flags
}

// SetError marks the span failed with msg.
func (s *Span) SetError(msg string) {
	if s != nil {
		s.errMsg = msg
	}
}

// End ends the span; a sampled one is handed out on the next Take.
func (s *Span) End() {
	if s == nil || !s.end.IsZero() {
		return
	}
	s.end = time.Now()
	if !s.sampled {
		return
	}
	s.t.mu.Lock()
	s.t.ended = append(s.t.ended, s)
	s.t.mu.Unlock()
}
