package cniwire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// The few protobuf encodings the envelopes and the CNI messages need.

func appendVarint(b []byte, n protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, n, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendBytes(b []byte, n protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// appendString appends a string field, leaving it out when empty (proto3's
// default).
func appendString(b []byte, n protowire.Number, v string) []byte {
	if v == "" {
		return b
	}
	b = protowire.AppendTag(b, n, protowire.BytesType)
	return protowire.AppendString(b, v)
}

var errMalformed = errors.New("malformed protobuf")

// eachField calls f with each field of the message in p: its number and
// either its varint value or its bytes. Fields of other wire types are
// skipped, as protobuf skips unknown fields.
func eachField(p []byte, f func(n protowire.Number, v uint64, b []byte) error) error {
	for len(p) > 0 {
		n, typ, l := protowire.ConsumeTag(p)
		if l < 0 {
			return fmt.Errorf("%w: %v", errMalformed, protowire.ParseError(l))
		}
		p = p[l:]
		var v uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			v, l = protowire.ConsumeVarint(p)
		case protowire.BytesType:
			b, l = protowire.ConsumeBytes(p)
		default:
			l = protowire.ConsumeFieldValue(n, typ, p)
		}
		if l < 0 {
			return fmt.Errorf("%w: field %d: %v", errMalformed, n, protowire.ParseError(l))
		}
		p = p[l:]
		if typ != protowire.VarintType && typ != protowire.BytesType {
			continue
		}
		if err := f(n, v, b); err != nil {
			return err
		}
	}
	return nil
}
