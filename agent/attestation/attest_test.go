package attestation

import (
	"context"
	"crypto/ed25519"
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
}

func (f *fakeAuth) Challenge(context.Context, *allotv1.ChallengeRequest, ...grpc.CallOption) (*allotv1.ChallengeResponse, error) {
	return &allotv1.ChallengeResponse{Nonce: []byte("nonce")}, nil
}

func (f *fakeAuth) Attest(_ context.Context, in *allotv1.AttestRequest, _ ...grpc.CallOption) (*allotv1.AttestResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refusing {
		return nil, status.Error(codes.PermissionDenied, "bound to another key")
	}
	if !ed25519.Verify(in.GetNodeKey(), allotv1.AttestMessage(in.GetNonce(), in.GetDocument()), in.GetNonceSignature()) {
		return nil, status.Error(codes.Unauthenticated, "bad signature")
	}
	f.attests++
	f.lastKey = in.GetNodeKey()
	return &allotv1.AttestResponse{Token: "tok", InstanceId: "i-0abc", ExpiresUnixMs: f.now().Add(f.ttl).UnixMilli()}, nil
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
	c, err := New(Config{IMDS: md, Key: key, Now: clock})
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
			if err != nil || m["authorization"] != "Bearer tok" {
				t.Errorf("metadata %v, %v", m, err)
			}
		}()
	}
	wg.Wait()
	if fa.attests != 1 || !fa.lastKey.Equal(key.Public()) {
		t.Fatalf("10 concurrent calls: %d attestations, want 1 with the node key", fa.attests)
	}
	advance(4 * time.Minute)
	_, _ = c.GetRequestMetadata(ctx)
	if fa.attests != 1 {
		t.Fatalf("before half the token's life: %d attestations", fa.attests)
	}
	advance(2 * time.Minute)
	_, _ = c.GetRequestMetadata(ctx)
	if fa.attests != 2 {
		t.Fatalf("past half the token's life: %d attestations, want 2", fa.attests)
	}
	// The broker refusing the token makes the next call attest again.
	c.dropOn(allotv1.NodeService_Heartbeat_FullMethodName, status.Error(codes.Unauthenticated, "expired"))
	_, _ = c.GetRequestMetadata(ctx)
	if fa.attests != 3 {
		t.Fatalf("after Unauthenticated: %d attestations, want 3", fa.attests)
	}
	c.dropOn(allotv1.NodeService_Heartbeat_FullMethodName, status.Error(codes.Unavailable, "down"))
	_, _ = c.GetRequestMetadata(ctx)
	if fa.attests != 3 {
		t.Fatalf("Unavailable must not drop the token: %d attestations", fa.attests)
	}
	fa.refusing = true
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
