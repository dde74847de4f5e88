package auth

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkVerify is a token checked on every node call: the same few
// thousand tokens again and again.
func BenchmarkVerify(b *testing.B) {
	ctx := context.Background()
	s := NewSigner(&memStore{}, nil)
	toks := make([]string, 5000)
	for i := range toks {
		var err error
		toks[i], err = s.Issue(ctx, Claims{InstanceID: fmt.Sprintf("i-%017x", i), KeyID: "SHA256:abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", Expires: time.Now().Add(time.Hour).UnixMilli()})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Verify(ctx, toks[i%len(toks)]); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifiedTokensRemembered: a checked token is remembered and still
// expires; a refused one is never remembered; the memory is bounded.
func TestVerifiedTokensRemembered(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	s := NewSigner(&memStore{}, func() time.Time { return now })
	tok, err := s.Issue(ctx, Claims{InstanceID: "i-1", KeyID: "k", Expires: now.Add(time.Minute).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c, err := s.Verify(ctx, tok); err != nil || c.InstanceID != "i-1" {
			t.Fatalf("verify: %+v %v", c, err)
		}
	}
	forged := tok[:len(tok)-2] + "AA"
	for range 2 {
		if _, err := s.Verify(ctx, forged); err == nil {
			t.Fatal("a forged token verified")
		}
	}
	if len(s.verified) != 1 {
		t.Fatalf("%d tokens remembered, want 1 (the forged one must not be)", len(s.verified))
	}
	for i := len(s.verified); i < maxVerified; i++ {
		s.verified[fmt.Sprint(i)] = Claims{}
	}
	other, err := s.Issue(ctx, Claims{InstanceID: "i-2", KeyID: "k", Expires: now.Add(time.Minute).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Verify(ctx, other); err != nil || c.InstanceID != "i-2" {
		t.Fatalf("verify at the bound: %+v %v", c, err)
	}
	if len(s.verified) != 1 {
		t.Fatalf("%d tokens remembered after the bound, want 1", len(s.verified))
	}
	now = now.Add(time.Minute)
	if _, err := s.Verify(ctx, other); err == nil {
		t.Fatal("a remembered token verified after it expired")
	}
}
