// Package cniwire is the plugin's wire on the agent's CNI socket: one call
// per connection, each message a length-prefixed protobuf envelope.
//
// The plugin is executed once per CNI command, so what it costs to start
// matters as much as the call itself. A gRPC client costs the plugin the
// gRPC and protobuf-registry packages' initialisation and an HTTP/2
// handshake for a single call; this wire costs one write and two reads, and
// links only the standard library (and internal/pbwire's few protobuf encodings).
// The agent still serves gRPC on the same socket for every other caller
// (tools, tests): it tells the two apart by the first bytes a client sends,
// and both reach the same handlers.
//
// A call, in order:
//
//	client: Preamble, then a request frame
//	server: Preamble (as soon as it has read the client's)
//	server: a response frame
//
// The server's preamble tells the client that the agent is alive before
// the call's own work starts, so a frozen agent (one that accepts
// connections into the kernel's backlog and never runs) is told apart from
// a slow call after a short bound. A frame is a 4-byte big-endian length
// and that many bytes of protobuf:
//
//	message Request {
//	  uint32 method = 1;            // Method
//	  uint64 timeout_ms = 2;        // the client's deadline, as gRPC's grpc-timeout
//	  repeated Header headers = 3;  // trace context (W3C traceparent, tracestate, baggage)
//	  bytes body = 4;               // allot.v1.CNIRequest, CNIGCRequest or CNIStatusRequest;
//	                                // for MethodSpans, an OTLP ExportTraceServiceRequest
//	}
//	message Header { string key = 1; string value = 2; }
//	message Response {
//	  uint32 code = 1;              // a gRPC status code; 0 is success
//	  string message = 2;           // the error's message when code is not 0
//	  bytes body = 3;               // allot.v1.CNIAddResult etc. when code is 0
//	}
//
// The bodies are the CNIService messages of proto/allot/v1/cni.proto; the
// agent decodes them with the generated types, and this package's own
// codec for them (messages.go) is tested against those types.
//
// The plugin's spans travel on this wire too, so that the plugin needs no
// exporter (and no TLS) of its own: when its tracing is on, the plugin
// makes one more call before it exits, MethodSpans, whose body is its
// finished spans as OTLP, and the agent exports them with its own
// exporter. The method number is the version: an agent older than
// MethodSpans answers Unimplemented ("unknown method"), and the plugin
// drops its spans and says so on stderr; a plugin older than it exports
// its spans itself and never calls it. Either way the pod's call is
// already done: tracing never fails one.
package cniwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/allotnet/allot/internal/pbwire"
)

// Preamble opens every connection on this wire, in both directions. A gRPC
// client's first bytes are HTTP/2's connection preface ("PRI * HTTP/2.0…"),
// so the agent can tell the two apart from the first len(Preamble) bytes.
const Preamble = "ALLOTCNI\x00\x01"

// MaxFrame bounds a frame (gRPC's default receive limit), so a bad peer
// can't make the other side allocate without bound.
const MaxFrame = 4 << 20

// Method is the CNIService method a request calls.
type Method uint32

// The methods, as in CNIService.
const (
	MethodAdd Method = iota + 1
	MethodDel
	MethodCheck
	MethodGC
	MethodStatus
	// MethodSpans is not a CNIService method: it hands the agent the
	// plugin's finished spans to export. The answer has no body.
	MethodSpans
)

// MaxSpans bounds a MethodSpans body. The plugin's two spans take well
// under a kilobyte.
const MaxSpans = 64 << 10

var methodNames = map[Method]string{MethodAdd: "Add", MethodDel: "Del", MethodCheck: "Check", MethodGC: "GC",
	MethodStatus: "Status", MethodSpans: "Spans"}

// String is the method's name in CNIService ("Add").
func (m Method) String() string {
	if n, ok := methodNames[m]; ok {
		return n
	}
	return fmt.Sprintf("Method(%d)", uint32(m))
}

// FullName is the method as gRPC names it ("allot.v1.CNIService/Add"),
// which is also the name of its spans on either wire.
func (m Method) FullName() string { return "allot.v1.CNIService/" + m.String() }

// Request is one call's envelope.
type Request struct {
	Method Method
	// Timeout is what is left of the client's deadline; 0 means none.
	Timeout time.Duration
	// Headers carry trace context, as gRPC metadata does.
	Headers map[string]string
	Body    []byte
}

// Response is one call's answer: Code 0 and Body, or an error.
type Response struct {
	Code    Code
	Message string
	Body    []byte
}

// Request and response fields.
const (
	reqMethod  pbwire.Number = 1
	reqTimeout pbwire.Number = 2
	reqHeader  pbwire.Number = 3
	reqBody    pbwire.Number = 4
	hdrKey     pbwire.Number = 1
	hdrValue   pbwire.Number = 2
	resCode    pbwire.Number = 1
	resMessage pbwire.Number = 2
	resBody    pbwire.Number = 3
)

// AppendRequest appends r's frame to b.
func AppendRequest(b []byte, r Request) []byte {
	var m []byte
	m = appendVarint(m, reqMethod, uint64(r.Method))
	if r.Timeout > 0 {
		m = appendVarint(m, reqTimeout, uint64(max(r.Timeout.Milliseconds(), 1)))
	}
	for k, v := range r.Headers {
		var h []byte
		h = appendString(h, hdrKey, k)
		h = appendString(h, hdrValue, v)
		m = appendBytes(m, reqHeader, h)
	}
	m = appendBytes(m, reqBody, r.Body)
	return appendFrame(b, m)
}

// ParseRequest decodes a request frame's payload.
func ParseRequest(p []byte) (Request, error) {
	var r Request
	err := eachField(p, func(n pbwire.Number, v uint64, b []byte) error {
		switch n {
		case reqMethod:
			r.Method = Method(v)
		case reqTimeout:
			r.Timeout = time.Duration(min(v, uint64(1<<62)/uint64(time.Millisecond))) * time.Millisecond
		case reqHeader:
			k, val, err := parseHeader(b)
			if err != nil {
				return err
			}
			if r.Headers == nil {
				r.Headers = map[string]string{}
			}
			r.Headers[k] = val
		case reqBody:
			r.Body = b
		}
		return nil
	})
	if err != nil {
		return Request{}, fmt.Errorf("cni wire request: %w", err)
	}
	return r, nil
}

// parseHeader decodes a request header's key and value.
func parseHeader(p []byte) (k, v string, err error) {
	err = eachField(p, func(n pbwire.Number, _ uint64, b []byte) error {
		switch n {
		case hdrKey:
			k = string(b)
		case hdrValue:
			v = string(b)
		}
		return nil
	})
	return k, v, err
}

// AppendResponse appends r's frame to b.
func AppendResponse(b []byte, r Response) []byte {
	var m []byte
	if r.Code != OK {
		m = appendVarint(m, resCode, uint64(r.Code))
		m = appendString(m, resMessage, r.Message)
	}
	if len(r.Body) > 0 {
		m = appendBytes(m, resBody, r.Body)
	}
	return appendFrame(b, m)
}

// ParseResponse decodes a response frame's payload.
func ParseResponse(p []byte) (Response, error) {
	var r Response
	err := eachField(p, func(n pbwire.Number, v uint64, b []byte) error {
		switch n {
		case resCode:
			r.Code = Code(v)
		case resMessage:
			r.Message = string(b)
		case resBody:
			r.Body = b
		}
		return nil
	})
	if err != nil {
		return Response{}, fmt.Errorf("cni wire response: %w", err)
	}
	return r, nil
}

// ErrFrameTooLarge is a frame longer than MaxFrame.
var ErrFrameTooLarge = errors.New("cni wire frame too large")

// ReadFrame reads one frame from r and returns its payload.
func ReadFrame(r io.Reader) ([]byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if n > MaxFrame {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrFrameTooLarge, n, MaxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return p, nil
}

func appendFrame(b, payload []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}
