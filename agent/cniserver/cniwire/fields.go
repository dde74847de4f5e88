package cniwire

import "github.com/allotnet/allot/internal/pbwire"

// The few protobuf encodings the envelopes and the CNI messages need, on
// internal/pbwire (not protobuf's own wire package, whose initialisation
// every exec of the plugin would pay for).

func appendVarint(b []byte, n pbwire.Number, v uint64) []byte {
	return pbwire.AppendVarint(pbwire.AppendTag(b, n, pbwire.VarintType), v)
}

func appendBytes(b []byte, n pbwire.Number, v []byte) []byte {
	return pbwire.AppendBytes(pbwire.AppendTag(b, n, pbwire.BytesType), v)
}

// appendString appends a string field, leaving it out when empty (proto3's
// default).
func appendString(b []byte, n pbwire.Number, v string) []byte {
	if v == "" {
		return b
	}
	return pbwire.AppendString(pbwire.AppendTag(b, n, pbwire.BytesType), v)
}

// eachField calls f with each varint and length-delimited field of the
// message in p: its number and either its value or its bytes. Fixed-width
// fields are skipped, as protobuf skips unknown fields; a malformed
// message (or a group) is an error.
func eachField(p []byte, f func(n pbwire.Number, v uint64, b []byte) error) error {
	return pbwire.Each(p, func(n pbwire.Number, t pbwire.Type, v uint64, b []byte) error {
		if t != pbwire.VarintType && t != pbwire.BytesType {
			return nil
		}
		return f(n, v, b)
	})
}
