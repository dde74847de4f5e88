package pbwire_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/allotnet/allot/internal/pbwire"
)

// edgeValues are the varint lengths' boundaries and the extremes.
var edgeValues = []uint64{0, 1, 127, 128, 255, 256, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<28 - 1, 1 << 28,
	1<<35 - 1, 1 << 35, 1<<42 - 1, 1 << 42, 1<<49 - 1, 1 << 49, 1<<56 - 1, 1 << 56, 1<<63 - 1, 1 << 63, math.MaxUint64}

// TestAppendMatchesProtowire: every encoding is protowire's, byte for byte.
func TestAppendMatchesProtowire(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := append([]uint64(nil), edgeValues...)
	for range 2000 {
		vals = append(vals, r.Uint64()>>r.IntN(64))
	}
	for _, v := range vals {
		if got, want := pbwire.AppendVarint(nil, v), protowire.AppendVarint(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("varint %d: %x, protowire %x", v, got, want)
		}
		if got, want := pbwire.AppendFixed64(nil, v), protowire.AppendFixed64(nil, v); !bytes.Equal(got, want) {
			t.Fatalf("fixed64 %d: %x, protowire %x", v, got, want)
		}
		if got, want := pbwire.AppendFixed32(nil, uint32(v)), protowire.AppendFixed32(nil, uint32(v)); !bytes.Equal(got, want) {
			t.Fatalf("fixed32 %d: %x, protowire %x", v, got, want)
		}
	}
	for _, n := range []int32{1, 2, 15, 16, 2047, 2048, 1<<29 - 1} {
		for _, typ := range []pbwire.Type{pbwire.VarintType, pbwire.Fixed64Type, pbwire.BytesType, pbwire.Fixed32Type} {
			got := pbwire.AppendTag(nil, pbwire.Number(n), typ)
			want := protowire.AppendTag(nil, protowire.Number(n), protowire.Type(typ))
			if !bytes.Equal(got, want) {
				t.Fatalf("tag %d/%d: %x, protowire %x", n, typ, got, want)
			}
		}
	}
	for _, s := range []string{"", "a", string(make([]byte, 127)), string(make([]byte, 128)), string(make([]byte, 70000))} {
		if got, want := pbwire.AppendString(nil, s), protowire.AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("string of %d bytes differs", len(s))
		}
		if got, want := pbwire.AppendBytes(nil, []byte(s)), protowire.AppendBytes(nil, []byte(s)); !bytes.Equal(got, want) {
			t.Fatalf("bytes of %d differ", len(s))
		}
	}
}

// TestConsumeMatchesProtowire: on random and truncated input, a varint,
// a tag and a length-delimited value are read as protowire reads them, and
// whatever protowire refuses is refused.
func TestConsumeMatchesProtowire(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var inputs [][]byte
	for _, v := range edgeValues {
		b := protowire.AppendVarint(nil, v)
		for i := 0; i <= len(b); i++ {
			inputs = append(inputs, b[:i])
		}
	}
	// An 11-byte varint and a 10th byte past 64 bits.
	inputs = append(inputs, bytes.Repeat([]byte{0xff}, 11), append(bytes.Repeat([]byte{0xff}, 9), 0x02))
	for range 20000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		inputs = append(inputs, b)
	}
	for _, b := range inputs {
		v, n := pbwire.ConsumeVarint(b)
		wv, wn := protowire.ConsumeVarint(b)
		if (n < 0) != (wn < 0) || n >= 0 && (v != wv || n != wn) {
			t.Fatalf("varint %x: %d, %d; protowire %d, %d", b, v, n, wv, wn)
		}
		num, typ, n := pbwire.ConsumeTag(b)
		wnum, wtyp, wn := protowire.ConsumeTag(b)
		if (n < 0) != (wn < 0) || n >= 0 && (int32(num) != int32(wnum) || int8(typ) != int8(wtyp) || n != wn) {
			t.Fatalf("tag %x: %d/%d, %d; protowire %d/%d, %d", b, num, typ, n, wnum, wtyp, wn)
		}
		bs, n := pbwire.ConsumeBytes(b)
		wbs, wn := protowire.ConsumeBytes(b)
		if (n < 0) != (wn < 0) || n >= 0 && (!bytes.Equal(bs, wbs) || n != wn) {
			t.Fatalf("bytes %x: %x, %d; protowire %x, %d", b, bs, n, wbs, wn)
		}
	}
}

// TestEach reads a message protowire wrote, every wire type but groups,
// and refuses truncations and groups with ErrMalformed.
func TestEach(t *testing.T) {
	var m []byte
	m = protowire.AppendVarint(protowire.AppendTag(m, 1, protowire.VarintType), 300)
	m = protowire.AppendString(protowire.AppendTag(m, 2, protowire.BytesType), "hello")
	m = protowire.AppendFixed32(protowire.AppendTag(m, 3, protowire.Fixed32Type), 7)
	m = protowire.AppendFixed64(protowire.AppendTag(m, 4, protowire.Fixed64Type), 1<<40)
	type field struct {
		n pbwire.Number
		t pbwire.Type
		v uint64
		b string
	}
	var got []field
	err := pbwire.Each(m, func(n pbwire.Number, typ pbwire.Type, v uint64, b []byte) error {
		got = append(got, field{n, typ, v, string(b)})
		return nil
	})
	want := []field{{1, pbwire.VarintType, 300, ""}, {2, pbwire.BytesType, 0, "hello"},
		{3, pbwire.Fixed32Type, 7, ""}, {4, pbwire.Fixed64Type, 1 << 40, ""}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("Each: %v, %+v", err, got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	for i := 1; i < len(m); i++ {
		err := pbwire.Each(m[:i], func(pbwire.Number, pbwire.Type, uint64, []byte) error { return nil })
		// A cut that falls between fields leaves a valid, shorter message.
		if err != nil && !errors.Is(err, pbwire.ErrMalformed) {
			t.Errorf("cut at %d: %v, want ErrMalformed", i, err)
		}
	}
	if err := pbwire.Each(m[:len(m)-1], func(pbwire.Number, pbwire.Type, uint64, []byte) error { return nil }); !errors.Is(err, pbwire.ErrMalformed) {
		t.Errorf("truncated fixed64: %v, want ErrMalformed", err)
	}
	group := protowire.AppendTag(protowire.AppendTag(nil, 5, protowire.StartGroupType), 5, protowire.EndGroupType)
	if err := pbwire.Each(group, func(pbwire.Number, pbwire.Type, uint64, []byte) error { return nil }); !errors.Is(err, pbwire.ErrMalformed) {
		t.Errorf("group: %v, want ErrMalformed", err)
	}
}
