package otlp

import "github.com/allotnet/allot/internal/pbwire"

// The OTLP messages, encoded by hand with their field numbers from
// opentelemetry/proto/collector/trace/v1 and trace/v1; the tests decode
// them with the generated types.

func tag(b []byte, n pbwire.Number, t pbwire.Type) []byte { return pbwire.AppendTag(b, n, t) }

func str(b []byte, n pbwire.Number, v string) []byte {
	if v == "" {
		return b
	}
	return pbwire.AppendString(tag(b, n, pbwire.BytesType), v)
}

func msg(b []byte, n pbwire.Number, m []byte) []byte {
	return pbwire.AppendBytes(tag(b, n, pbwire.BytesType), m)
}

func fixed64(b []byte, n pbwire.Number, v uint64) []byte {
	return pbwire.AppendFixed64(tag(b, n, pbwire.Fixed64Type), v)
}

// Take returns the ended sampled spans as one OTLP
// ExportTraceServiceRequest, whose resource is service.name and the
// config's resource attributes, and forgets them; nil when there are none.
func (t *Tracer) Take() []byte {
	t.mu.Lock()
	spans := t.ended
	t.ended = nil
	t.mu.Unlock()
	if len(spans) == 0 {
		return nil
	}
	resource := [][2]string{{"service.name", t.cfg.ServiceName}}
	for k, v := range t.cfg.Attributes {
		if k != "service.name" {
			resource = append(resource, [2]string{k, v})
		}
	}
	return exportRequest(resource, t.scope, spans)
}

// keyValue is a KeyValue with a string AnyValue.
func keyValue(k, v string) []byte {
	return msg(str(nil, 1, k), 2, str(nil, 1, v))
}

// exportRequest is an ExportTraceServiceRequest holding spans, from one
// resource (attrs) and one instrumentation scope.
func exportRequest(resource [][2]string, scope string, spans []*Span) []byte {
	var res []byte
	for _, kv := range resource {
		res = msg(res, 1, keyValue(kv[0], kv[1]))
	}
	ss := msg(nil, 1, str(nil, 1, scope))
	for _, s := range spans {
		ss = msg(ss, 2, encodeSpan(s))
	}
	rs := msg(nil, 1, res)
	rs = msg(rs, 2, ss)
	return msg(nil, 1, rs)
}

func encodeSpan(s *Span) []byte {
	b := msg(nil, 1, s.traceID[:])
	b = msg(b, 2, s.spanID[:])
	if s.parentID != ([8]byte{}) {
		b = msg(b, 4, s.parentID[:])
	}
	b = str(b, 5, s.name)
	b = pbwire.AppendVarint(tag(b, 6, pbwire.VarintType), uint64(s.kind))
	b = fixed64(b, 7, uint64(s.start.UnixNano()))
	b = fixed64(b, 8, uint64(s.end.UnixNano()))
	for _, kv := range s.attrs {
		b = msg(b, 9, keyValue(kv[0], kv[1]))
	}
	if s.errMsg != "" {
		// An "exception" event, as the SDK's RecordError makes, and the
		// status: message 2, code 3 (STATUS_CODE_ERROR = 2).
		ev := fixed64(nil, 1, uint64(s.end.UnixNano()))
		ev = str(ev, 2, "exception")
		ev = msg(ev, 3, keyValue("exception.message", s.errMsg))
		b = msg(b, 11, ev)
		st := str(nil, 2, s.errMsg)
		st = pbwire.AppendVarint(tag(st, 3, pbwire.VarintType), 2)
		b = msg(b, 15, st)
	}
	// flags: the W3C trace flags (sampled).
	return pbwire.AppendFixed32(tag(b, 16, pbwire.Fixed32Type), 1)
}
