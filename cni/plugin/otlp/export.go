package otlp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"
)

// exportPath is the OTLP trace service's Export method.
const exportPath = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

// defaultTimeout bounds an export when the config sets none, as the SDK's.
const defaultTimeout = 10 * time.Second

// Flush exports the ended sampled spans in one call, within ctx and the
// config's timeout. An error means they were not delivered.
func (t *Tracer) Flush(ctx context.Context) error {
	t.mu.Lock()
	spans := t.ended
	t.ended = nil
	t.mu.Unlock()
	if len(spans) == 0 {
		return nil
	}
	timeout := t.cfg.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resource := [][2]string{{"service.name", t.cfg.ServiceName}}
	for k, v := range t.cfg.Attributes {
		if k != "service.name" {
			resource = append(resource, [2]string{k, v})
		}
	}
	if err := t.export(ctx, exportRequest(resource, t.scope, spans)); err != nil {
		return fmt.Errorf("export %d spans to %s: %w", len(spans), t.cfg.Endpoint, err)
	}
	return nil
}

// export makes one gRPC call carrying body on a new HTTP/2 connection.
func (t *Tracer) export(ctx context.Context, body []byte) error {
	u, err := url.Parse(t.cfg.Endpoint)
	if err != nil {
		return err
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "4317")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	scheme := "http"
	if !t.cfg.Insecure {
		scheme = "https"
		tc, err := t.tlsConfig(u.Hostname())
		if err != nil {
			return err
		}
		tlsConn := tls.Client(conn, tc)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS handshake: %w", err)
		}
		conn = tlsConn
	}
	hdrs := [][2]string{
		{":method", "POST"}, {":scheme", scheme}, {":path", exportPath}, {":authority", u.Host},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	}
	if dl, ok := ctx.Deadline(); ok {
		hdrs = append(hdrs, [2]string{"grpc-timeout", fmt.Sprintf("%dm", max(time.Until(dl).Milliseconds(), 1))})
	}
	for k, v := range t.cfg.Headers {
		hdrs = append(hdrs, [2]string{k, v})
	}
	if err := writeCall(conn, hdrs, body); err != nil {
		return err
	}
	return readStatus(conn)
}

func (t *Tracer) tlsConfig(host string) (*tls.Config, error) {
	tc := &tls.Config{ServerName: host, NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12}
	if t.cfg.CAFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(t.cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("OTLP collector CA: %w", err)
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, errors.New("OTLP collector CA " + t.cfg.CAFile + ": no certificate in it")
	}
	return tc, nil
}

// HTTP/2 frame types and flags (RFC 9113) this client uses.
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePing         = 0x6
	frameGoAway       = 0x7
	frameContinuation = 0x9

	flagAck        = 0x1
	flagEndStream  = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// maxData is what one DATA frame may carry before the peer's settings are
// known (SETTINGS_MAX_FRAME_SIZE's initial value).
const maxData = 16384

func appendFrame(b []byte, typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), typ, flags)
	b = binary.BigEndian.AppendUint32(b, stream)
	return append(b, payload...)
}

// writeCall sends the client preface, empty settings, and the call on
// stream 1: its headers, then the gRPC message (a 5-byte prefix and body).
func writeCall(conn net.Conn, hdrs [][2]string, body []byte) error {
	msg := make([]byte, 5, 5+len(body))
	binary.BigEndian.PutUint32(msg[1:], uint32(len(body)))
	msg = append(msg, body...)
	if len(msg) > 65535 {
		// Past the initial flow-control window: more than the plugin's
		// two spans ever are.
		return fmt.Errorf("export of %d bytes is larger than this exporter sends", len(msg))
	}
	var block []byte
	for _, h := range hdrs {
		block = appendHeader(block, h[0], h[1])
	}
	b := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	b = appendFrame(b, frameSettings, 0, 0, nil)
	b = appendFrame(b, frameHeaders, flagEndHeaders, 1, block)
	for len(msg) > maxData {
		b = appendFrame(b, frameData, 0, 1, msg[:maxData])
		msg = msg[maxData:]
	}
	b = appendFrame(b, frameData, flagEndStream, 1, msg)
	_, err := conn.Write(b)
	return err
}

// appendHeader is an HPACK "literal header field without indexing, new
// name", without Huffman coding (RFC 7541 §6.2.2).
func appendHeader(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendHPACKInt(b, 7, uint64(len(name)))
	b = append(b, name...)
	b = appendHPACKInt(b, 7, uint64(len(value)))
	return append(b, value...)
}

// appendHPACKInt appends v as an HPACK integer with an n-bit prefix whose
// other bits (the Huffman flag here) are zero.
func appendHPACKInt(b []byte, n uint, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, byte(v))
	}
	b = append(b, byte(limit))
	v -= limit
	for v >= 128 {
		b = append(b, byte(v&0x7f|0x80))
		v >>= 7
	}
	return append(b, byte(v))
}
