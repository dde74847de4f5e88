package otlp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/net/http2/hpack"
)

// maxFrame bounds a frame this client accepts (its advertised
// SETTINGS_MAX_FRAME_SIZE is the default, 16384).
const maxFrame = 16384

// readStatus reads the collector's frames until stream 1 ends, answering
// its settings and pings, and returns the call's gRPC status as an error
// (nil for OK).
func readStatus(conn net.Conn) error {
	dec := hpack.NewDecoder(4096, nil)
	fields := map[string]string{}
	var block []byte
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return fmt.Errorf("read from the collector: %w", err)
		}
		n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags, stream := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		if n > maxFrame {
			return fmt.Errorf("collector sent a %d-byte frame", n)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(conn, p); err != nil {
			return fmt.Errorf("read from the collector: %w", err)
		}
		switch {
		case typ == frameSettings && flags&flagAck == 0:
			if _, err := conn.Write(appendFrame(nil, frameSettings, flagAck, 0, nil)); err != nil {
				return err
			}
		case typ == framePing && flags&flagAck == 0:
			if _, err := conn.Write(appendFrame(nil, framePing, flagAck, 0, p)); err != nil {
				return err
			}
		case typ == frameGoAway:
			return errors.New("the collector closed the connection (GOAWAY)")
		case stream != 1:
		case typ == frameRSTStream:
			return fmt.Errorf("the collector reset the call (code %d)", binary.BigEndian.Uint32(append(p, 0, 0, 0, 0)))
		case typ == frameHeaders || typ == frameContinuation:
			frag, err := headerFragment(typ, flags, p)
			if err != nil {
				return err
			}
			block = append(block, frag...)
			if flags&flagEndHeaders == 0 {
				continue
			}
			hf, err := dec.DecodeFull(block)
			if err != nil {
				return fmt.Errorf("collector's headers: %w", err)
			}
			block = block[:0]
			for _, f := range hf {
				fields[f.Name] = f.Value
			}
		}
		if stream == 1 && (typ == frameHeaders || typ == frameData) && flags&flagEndStream != 0 {
			return grpcStatus(fields)
		}
	}
}

// headerFragment strips a HEADERS frame's padding and priority.
func headerFragment(typ, flags byte, p []byte) ([]byte, error) {
	if typ != frameHeaders {
		return p, nil
	}
	pad := 0
	if flags&flagPadded != 0 {
		if len(p) < 1 {
			return nil, errors.New("collector sent a malformed HEADERS frame")
		}
		pad, p = int(p[0]), p[1:]
	}
	if flags&flagPriority != 0 {
		if len(p) < 5 {
			return nil, errors.New("collector sent a malformed HEADERS frame")
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, errors.New("collector sent a malformed HEADERS frame")
	}
	return p[:len(p)-pad], nil
}

// grpcStatus is the call's outcome from its headers and trailers.
func grpcStatus(f map[string]string) error {
	if s := f[":status"]; s != "200" {
		return fmt.Errorf("the collector answered HTTP status %q", s)
	}
	switch s := f["grpc-status"]; s {
	case "0":
		return nil
	case "":
		return errors.New("the collector's answer has no grpc-status")
	default:
		return fmt.Errorf("the collector refused the spans: grpc-status %s: %s", s, f["grpc-message"])
	}
}
