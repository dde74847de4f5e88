package cniserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// requestWait bounds how long a wire client may take to send its request
// after its preamble; the plugin sends both in one write.
const requestWait = 10 * time.Second

// tracerName names the spans of calls on the plugin's wire, which stand
// for what otelgrpc records of a gRPC call.
const tracerName = "github.com/allotnet/allot/agent/cniserver"

// serveWire answers one call on the plugin's wire; the client's preamble
// has been read. The call runs the same handler a gRPC call does, under a
// server span named as gRPC's (its parent the plugin's trace context), with
// the client's deadline, and is cancelled if the client goes away.
func (s *Server) serveWire(conn net.Conn) {
	defer conn.Close()
	if _, err := conn.Write([]byte(cniwire.Preamble)); err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(requestWait))
	p, err := cniwire.ReadFrame(conn)
	if err != nil {
		s.log.Warn("cni wire: no request", "err", err)
		if errors.Is(err, cniwire.ErrFrameTooLarge) {
			s.writeWire(conn, nil, cniwire.Errorf(cniwire.ResourceExhausted, "%v", err))
		}
		return
	}
	req, err := cniwire.ParseRequest(p)
	if err != nil {
		s.writeWire(conn, nil, cniwire.Errorf(cniwire.InvalidArgument, "%v", err))
		return
	}
	if req.Method == cniwire.MethodSpans {
		// No span of its own: it would be a trace per pod call, of the
		// spans' delivery.
		if err := s.takeSpans(req.Body); err != nil {
			s.log.Debug("cni wire: the plugin's spans refused", "err", err)
			s.writeWire(conn, nil, err)
			return
		}
		s.writeWire(conn, nil, nil)
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if req.Timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	// The client sends nothing more: a read returns only when it closes
	// the connection (gave up) or when this call's deferred Close runs.
	go func() {
		var b [1]byte
		_, _ = conn.Read(b[:])
		cancel()
	}()
	ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(req.Headers))
	ctx, span := otel.GetTracerProvider().Tracer(tracerName).Start(ctx, req.Method.FullName(),
		trace.WithSpanKind(trace.SpanKindServer))
	body, err := s.dispatch(ctx, req)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	s.writeWire(conn, body, err)
}

// writeWire sends the response: body, or err's code and message.
func (s *Server) writeWire(w io.Writer, body []byte, err error) {
	res := cniwire.Response{Body: body}
	if err != nil {
		res.Code, res.Message = wireCode(err)
	}
	if _, werr := w.Write(cniwire.AppendResponse(nil, res)); werr != nil {
		s.log.Warn("cni wire: answer not delivered", "err", werr)
	}
}

// wireCode is err's code on the plugin's wire: a handler's gRPC status
// keeps its code (the wire's codes are gRPC's), anything else is Internal.
func wireCode(err error) (cniwire.Code, string) {
	var we *cniwire.Error
	if errors.As(err, &we) {
		return we.Code, we.Message
	}
	if st, ok := status.FromError(err); ok {
		return cniwire.Code(st.Code()), st.Message()
	}
	return cniwire.Internal, err.Error()
}

// dispatch decodes the request's body with the generated types and runs the
// method's handler, the one gRPC runs.
func (s *Server) dispatch(ctx context.Context, req cniwire.Request) ([]byte, error) {
	var out proto.Message
	var err error
	switch req.Method {
	case cniwire.MethodAdd, cniwire.MethodDel, cniwire.MethodCheck:
		in := &allotv1.CNIRequest{}
		if err := unmarshal(req, in); err != nil {
			return nil, err
		}
		switch req.Method {
		case cniwire.MethodAdd:
			out, err = s.Add(ctx, in)
		case cniwire.MethodDel:
			out, err = s.Del(ctx, in)
		default:
			out, err = s.Check(ctx, in)
		}
	case cniwire.MethodGC:
		in := &allotv1.CNIGCRequest{}
		if err := unmarshal(req, in); err != nil {
			return nil, err
		}
		out, err = s.GC(ctx, in)
	case cniwire.MethodStatus:
		out, err = s.Status(ctx, &allotv1.CNIStatusRequest{})
	default:
		return nil, cniwire.Errorf(cniwire.Unimplemented, "unknown method %s", req.Method)
	}
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode %s result: %w", req.Method, err)
	}
	return b, nil
}

func unmarshal(req cniwire.Request, m proto.Message) error {
	if err := proto.Unmarshal(req.Body, m); err != nil {
		return cniwire.Errorf(cniwire.InvalidArgument, "%s request: %v", req.Method, err)
	}
	return nil
}
