package attestation

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/awssim/imds"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

type source struct{ md imds.Metadata }

func (s source) Metadata(id string) (imds.Metadata, bool) { return s.md, id == s.md.InstanceID }

// fakeAuth is a broker's AuthService that checks the node key's signature
// and counts attestations.
type fakeAuth struct {
	mu       sync.Mutex
	attests  int
	ttl      time.Duration
	now      func() time.Time
	lastKey  ed25519.PublicKey
	refusing bool
	failing  bool          // answer Unavailable
	gate     chan struct{} // if set, Attest waits for it to close
}

func (f *fakeAuth) Challenge(context.Context, *allotv1.ChallengeRequest, ...grpc.CallOption) (*allotv1.ChallengeResponse, error) {
	return &allotv1.ChallengeResponse{Nonce: []byte("nonce")}, nil
}

func (f *fakeAuth) Attest(_ context.Context, in *allotv1.AttestRequest, _ ...grpc.CallOption) (*allotv1.AttestResponse, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failing {
		return nil, status.Error(codes.Unavailable, "busy")
	}
	if f.refusing {
		return nil, status.Error(codes.PermissionDenied, "bound to another key")
	}
	if !ed25519.Verify(in.GetNodeKey(), allotv1.AttestMessage(in.GetNonce(), in.GetDocument()), in.GetNonceSignature()) {
		return nil, status.Error(codes.Unauthenticated, "bad signature")
	}
	f.attests++
	f.lastKey = in.GetNodeKey()
	return &allotv1.AttestResponse{Token: fmt.Sprintf("tok%d", f.attests), InstanceId: "i-0abc", ExpiresUnixMs: f.now().Add(f.ttl).UnixMilli()}, nil
}

func (f *fakeAuth) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attests
}

func (f *fakeAuth) set(fn func(*fakeAuth)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// waitAttests waits until f has answered n attestations.
func waitAttests(t *testing.T, f *fakeAuth, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.count() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d attestations, want %d", f.count(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// testCreds returns Credentials bound to a fakeAuth of ttl on a clock the
// test moves, renewing at renewFrom plus spread times renewSpread.
func testCreds(t *testing.T, ttl time.Duration, spread float64) (*Credentials, *fakeAuth, func(time.Duration)) {
	t.Helper()
	srv := httptest.NewServer(imds.NewHandler("i-0abc", source{imds.Metadata{
		InstanceID: "i-0abc", AvailabilityZone: "us-east-1a", AccountID: "123456789012",
	}}, imds.Options{TokenRequired: true, Signer: imds.NewSigner("us-east-1")}))
	t.Cleanup(srv.Close)
	md, err := identity.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	fa := &fakeAuth{ttl: ttl, now: clock}
	c, err := New(Config{IMDS: md, Key: key, Now: clock, Rand: func() float64 { return spread }})
	if err != nil {
		t.Fatal(err)
	}
	c.Bind(fa)
	return c, fa, advance
}

func token(t *testing.T, c *Credentials) string {
	t.Helper()
	tok, err := c.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Past its renewal time a call goes on with the token it has while the
// renewal runs in the background, however long the broker takes; one
// renewal runs at a time; its token is used once it arrives.
func TestRenewalInBackground(t *testing.T) {
	c, fa, advance := testCreds(t, 10*time.Minute, 0)
	if tok := token(t, c); tok != "tok1" {
		t.Fatalf("first token %q", tok)
	}
	gate := make(chan struct{})
	fa.set(func(f *fakeAuth) { f.gate = gate })
	advance(5*time.Minute + time.Second) // past half its life
	for range 20 {
		done := make(chan string, 1)
		go func() { done <- token(t, c) }()
		select {
		case tok := <-done:
			if tok != "tok1" {
				t.Fatalf("during the renewal a call got %q, want the current tok1", tok)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call waited for the background renewal")
		}
	}
	close(gate)
	waitAttests(t, fa, 2)
	deadline := time.Now().Add(10 * time.Second)
	for token(t, c) != "tok2" {
		if time.Now().After(deadline) {
			t.Fatal("the renewed token was never used")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	if n := fa.count(); n != 2 {
		t.Fatalf("20 calls during one renewal made %d attestations, want 2 in all", n)
	}
}

// Each token's renewal time is drawn within a fifth of its life after
// its half, and a token with less than a tenth of its life left is not
// used: the call waits for a new one.
func TestRenewalSpreadAndDue(t *testing.T) {
	c, fa, advance := testCreds(t, 10*time.Minute, 0.99)
	token(t, c)
	advance(6*time.Minute + 50*time.Second) // 0.68 of its life: before 0.5 + 0.2*0.99
	token(t, c)
	time.Sleep(10 * time.Millisecond)
	if n := fa.count(); n != 1 {
		t.Fatalf("before the drawn renewal time: %d attestations, want 1", n)
	}
	gate := make(chan struct{})
	fa.set(func(f *fakeAuth) { f.failing = true })
	advance(2 * time.Minute) // 0.88: renewal due, the broker fails it
	if tok := token(t, c); tok != "tok1" {
		t.Fatalf("a failed background renewal: got %q, want tok1 kept", tok)
	}
	time.Sleep(50 * time.Millisecond)
	fa.set(func(f *fakeAuth) { f.failing = false; f.gate = gate })
	token(t, c) // within a tenth of the life after the failure: no new attempt
	time.Sleep(10 * time.Millisecond)
	close(gate)
	if n := fa.count(); n != 1 {
		t.Fatalf("retried a failed renewal at once: %d attestations", n)
	}
	advance(1*time.Minute + time.Second) // 0.98: under a tenth left
	if tok := token(t, c); tok != "tok2" {
		t.Fatalf("with under a tenth of its life left a call got %q, want a new token", tok)
	}
}

func TestCredentials(t *testing.T) {
	srv := httptest.NewServer(imds.NewHandler("i-0abc", source{imds.Metadata{
		InstanceID: "i-0abc", AvailabilityZone: "us-east-1a", AccountID: "123456789012",
	}}, imds.Options{TokenRequired: true, Signer: imds.NewSigner("us-east-1")}))
	defer srv.Close()
	md, err := identity.NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "node.key"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	fa := &fakeAuth{ttl: 10 * time.Minute, now: clock}
	c, err := New(Config{IMDS: md, Key: key, Now: clock, Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.GetRequestMetadata(ctx); err == nil {
		t.Fatal("a token without a bound AuthService client")
	}
	c.Bind(fa)
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, err := c.GetRequestMetadata(ctx)
			if err != nil || m["authorization"] != "Bearer tok1" {
				t.Errorf("metadata %v, %v", m, err)
			}
		}()
	}
	wg.Wait()
	if fa.count() != 1 || !fa.lastKey.Equal(key.Public()) {
		t.Fatalf("10 concurrent calls: %d attestations, want 1 with the node key", fa.attests)
	}
	advance(4 * time.Minute)
	_, _ = c.GetRequestMetadata(ctx)
	if fa.count() != 1 {
		t.Fatalf("before half the token's life: %d attestations", fa.count())
	}
	advance(2 * time.Minute)
	_, _ = c.GetRequestMetadata(ctx)
	waitAttests(t, fa, 2) // renewed in the background
	for deadline := time.Now().Add(10 * time.Second); token(t, c) != "tok2"; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the renewed token was never used")
		}
	}
	// The broker refusing the token makes the next call attest again.
	c.dropOn(allotv1.NodeService_Heartbeat_FullMethodName, status.Error(codes.Unauthenticated, "expired"))
	_, _ = c.GetRequestMetadata(ctx)
	if fa.count() != 3 {
		t.Fatalf("after Unauthenticated: %d attestations, want 3", fa.count())
	}
	c.dropOn(allotv1.NodeService_Heartbeat_FullMethodName, status.Error(codes.Unavailable, "down"))
	_, _ = c.GetRequestMetadata(ctx)
	if fa.count() != 3 {
		t.Fatalf("Unavailable must not drop the token: %d attestations", fa.count())
	}
	fa.set(func(f *fakeAuth) { f.refusing = true })
	c.Invalidate()
	if _, err := c.GetRequestMetadata(ctx); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("refused attestation: %v, want PermissionDenied kept", err)
	}
}

func TestNodeKeyPersists(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "node.key")
	k1, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	k2, err := LoadOrCreateKey(p)
	if err != nil || !k1.Equal(k2) {
		t.Fatalf("reloaded key differs: %v", err)
	}
	if err := os.WriteFile(p, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(p); err == nil {
		t.Fatal("a corrupt key file was accepted (it must not be silently replaced: the broker binds the old key)")
	}
}
