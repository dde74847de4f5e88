// Package pbwire is the little of protobuf's wire format the CNI plugin's
// hand-written messages need: tags, varints, fixed-width and
// length-delimited fields, and a loop over a message's fields.
//
// The plugin is executed once per CNI command, and every package it links
// is initialised on every exec. protobuf's own low-level package
// (google.golang.org/protobuf/encoding/protowire) brings an initialiser
// that reads the executable to seed its deterministic randomness; this
// package does what the plugin used of it and initialises nothing. Its
// tests check it against protowire, byte for byte.
package pbwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Number is a field number.
type Number int32

// Type is a field's wire type.
type Type int8

// The wire types.
const (
	VarintType  Type = 0
	Fixed64Type Type = 1
	BytesType   Type = 2
	StartGroup  Type = 3
	EndGroup    Type = 4
	Fixed32Type Type = 5
)

// ErrMalformed is a message that is not valid protobuf (or uses groups,
// which no message read here has).
var ErrMalformed = errors.New("malformed protobuf")

// AppendTag appends field n's key with wire type t.
func AppendTag(b []byte, n Number, t Type) []byte {
	return AppendVarint(b, uint64(n)<<3|uint64(t&7))
}

// AppendVarint appends v as a base-128 varint.
func AppendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendBytes appends v with its length before it.
func AppendBytes(b, v []byte) []byte {
	return append(AppendVarint(b, uint64(len(v))), v...)
}

// AppendString appends v with its length before it.
func AppendString(b []byte, v string) []byte {
	return append(AppendVarint(b, uint64(len(v))), v...)
}

// AppendFixed32 appends v little-endian.
func AppendFixed32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// AppendFixed64 appends v little-endian.
func AppendFixed64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

// ConsumeVarint reads a varint from b: its value and length, or a length
// of -1 when b does not hold a valid one.
func ConsumeVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1 // past 64 bits
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}

// ConsumeTag reads a field's key: its number, wire type and length, or a
// length of -1.
func ConsumeTag(b []byte) (Number, Type, int) {
	v, l := ConsumeVarint(b)
	if l < 0 || v>>3 == 0 || v>>3 > math.MaxInt32 {
		return 0, 0, -1
	}
	return Number(v >> 3), Type(v & 7), l
}

// ConsumeBytes reads a length-delimited value: the bytes (a slice of b)
// and the length it took, or -1.
func ConsumeBytes(b []byte) ([]byte, int) {
	n, l := ConsumeVarint(b)
	if l < 0 || n > uint64(len(b)-l) {
		return nil, -1
	}
	return b[l : l+int(n)], l + int(n)
}

// Each calls f with each field of the message in p, in order: its number
// and wire type, and its value, as v for varints and fixed-width fields
// and as b (a slice of p) for length-delimited ones. Groups are an error.
func Each(p []byte, f func(n Number, t Type, v uint64, b []byte) error) error {
	for len(p) > 0 {
		n, t, l := ConsumeTag(p)
		if l < 0 {
			return fmt.Errorf("%w: bad field key", ErrMalformed)
		}
		p = p[l:]
		var v uint64
		var b []byte
		switch t {
		case VarintType:
			v, l = ConsumeVarint(p)
		case BytesType:
			b, l = ConsumeBytes(p)
		case Fixed32Type:
			if l = -1; len(p) >= 4 {
				v, l = uint64(binary.LittleEndian.Uint32(p)), 4
			}
		case Fixed64Type:
			if l = -1; len(p) >= 8 {
				v, l = binary.LittleEndian.Uint64(p), 8
			}
		default:
			return fmt.Errorf("%w: field %d has wire type %d", ErrMalformed, n, t)
		}
		if l < 0 {
			return fmt.Errorf("%w: field %d: truncated or bad value", ErrMalformed, n)
		}
		p = p[l:]
		if err := f(n, t, v, b); err != nil {
			return err
		}
	}
	return nil
}
