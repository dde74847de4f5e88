package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/identity"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// attestAs attests instance id's document (read from its IMDS, as anyone
// on that instance could) with key.
func (e *env) attestAs(t *testing.T, id string, key ed25519.PrivateKey, edit func(*allotv1.AttestRequest)) (*allotv1.AttestResponse, error) {
	t.Helper()
	url, err := e.sim.IMDSEndpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := identity.NewClient(url)
	sd, err := identity.FetchSignedDocument(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	auth := allotv1.NewAuthServiceClient(e.dial(t, nil))
	ctx := context.Background()
	ch, err := auth.Challenge(ctx, &allotv1.ChallengeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	req := &allotv1.AttestRequest{
		Document: sd.Document, Signature: sd.Signature, NodeKey: key.Public().(ed25519.PublicKey), Nonce: ch.GetNonce(),
		NonceSignature: ed25519.Sign(key, allotv1.AttestMessage(ch.GetNonce(), sd.Document)),
	}
	if edit != nil {
		edit(req)
	}
	return auth.Attest(ctx, req)
}

func newKey() ed25519.PrivateKey {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	return k
}

// TestAttestation: the first key to attest an instance keeps it — the same
// key again (an agent restart) is served, a stolen document under another
// key is refused, as is any proof that does not hold; an instance outside
// the broker's VPCs is refused however good its proof. Only proofs with a
// genuine signature cost a DescribeInstances, one per instance.
func TestAttestation(t *testing.T) {
	e := startEnv(t)
	owner := newKey()
	resp, err := e.attestAs(t, instA, owner, nil)
	if err != nil {
		t.Fatalf("first attestation: %v", err)
	}
	if resp.GetInstanceId() != instA || resp.GetToken() == "" ||
		time.Until(time.UnixMilli(resp.GetExpiresUnixMs())) < 10*time.Minute {
		t.Fatalf("response %+v", resp)
	}
	if _, err := e.attestAs(t, instA, owner, nil); err != nil {
		t.Fatalf("the same key again: %v", err)
	}
	_, err = e.attestAs(t, instA, newKey(), nil)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "bound to node key "+Fingerprint(owner.Public().(ed25519.PublicKey))) {
		t.Fatalf("stolen document, another key: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*allotv1.AttestRequest)
		want codes.Code
	}{
		"altered document": {func(r *allotv1.AttestRequest) {
			r.Document = []byte(strings.Replace(string(r.Document), "c5.xlarge", "m5.24xlarge", 1))
		}, codes.Unauthenticated},
		"another instance's signature": {func(r *allotv1.AttestRequest) {
			r.Signature = strings.Repeat("QUFB", 86) + "QQ=="
		}, codes.Unauthenticated},
		"nonce signed by another key": {func(r *allotv1.AttestRequest) {
			r.NonceSignature = ed25519.Sign(newKey(), allotv1.AttestMessage(r.Nonce, r.Document))
		}, codes.Unauthenticated},
		"nonce not from the broker": {func(r *allotv1.AttestRequest) {
			r.Nonce = make([]byte, 40)
		}, codes.Unauthenticated},
		"huge document": {func(r *allotv1.AttestRequest) {
			r.Document = make([]byte, 1<<20)
		}, codes.Unauthenticated},
	} {
		_, err := e.attestAs(t, instB, newKey(), tc.edit)
		if status.Code(err) != tc.want {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if len(err.Error()) > 512 {
			t.Errorf("%s: error of %d bytes", name, len(err.Error()))
		}
	}
	if _, err := e.attestAs(t, instOther, newKey(), nil); status.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "vpc-0b000002") {
		t.Fatalf("instance in another VPC: %v", err)
	}
	// instA (cached), instOther: two. The refused proofs for instB never
	// reached EC2.
	if n := e.sim.Counters()["DescribeInstances"].Calls; n != 2 {
		t.Errorf("DescribeInstances calls = %d, want 2", n)
	}
}

// TestAttestationOfStoppedInstance: a document of an instance EC2 no
// longer runs is refused.
func TestAttestationOfTerminatedInstance(t *testing.T) {
	e := startEnv(t)
	url, _ := e.sim.IMDSEndpoint(instB)
	md, _ := identity.NewClient(url)
	sd, err := identity.FetchSignedDocument(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.sim.RemoveInstance(instB); err != nil {
		t.Fatal(err)
	}
	auth := allotv1.NewAuthServiceClient(e.dial(t, nil))
	ch, _ := auth.Challenge(context.Background(), &allotv1.ChallengeRequest{})
	key := newKey()
	_, err = auth.Attest(context.Background(), &allotv1.AttestRequest{
		Document: sd.Document, Signature: sd.Signature, NodeKey: key.Public().(ed25519.PublicKey), Nonce: ch.GetNonce(),
		NonceSignature: ed25519.Sign(key, allotv1.AttestMessage(ch.GetNonce(), sd.Document)),
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("terminated instance: %v", err)
	}
}

// TestBindingFirstWinsAcrossReplicas: replicas binding the same instance
// at once with different keys agree on one winner, stored in etcd.
func TestBindingFirstWinsAcrossReplicas(t *testing.T) {
	e := startEnv(t)
	ctx := context.Background()
	keys := make([]ed25519.PublicKey, 8)
	got := make([]Binding, 8)
	var wg sync.WaitGroup
	for i := range keys {
		keys[i] = newKey().Public().(ed25519.PublicKey)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := e.store.Bind(ctx, Binding{InstanceID: instA, Key: keys[i], PendingTime: time.Unix(1, 0)})
			if err != nil {
				t.Error(err)
			}
			got[i] = b
		}()
	}
	wg.Wait()
	for i := range got {
		if string(got[i].Key) != string(got[0].Key) {
			t.Fatalf("replica %d sees key %x, replica 0 %x", i, got[i].Key, got[0].Key)
		}
	}
	if err := e.store.Forget(ctx, instA); err != nil {
		t.Fatal(err)
	}
	b, err := e.store.Bind(ctx, Binding{InstanceID: instA, Key: keys[7], PendingTime: time.Unix(1, 0)})
	if err != nil || string(b.Key) != string(keys[7]) {
		t.Fatalf("after Forget: %x %v", b.Key, err)
	}
}

// TestRefusalQuotesShortPrefix: a node acting for a 1 MB "instance"
// is refused with a message that quotes a short prefix.
func TestRefusalQuotesShortPrefix(t *testing.T) {
	e := startEnv(t)
	conn, _ := e.node(t, instA)
	_, err := allotv1.NewNodeServiceClient(conn).Heartbeat(context.Background(),
		&allotv1.HeartbeatRequest{InstanceId: "i-" + strings.Repeat("f", 1<<20)})
	if status.Code(err) != codes.PermissionDenied || len(err.Error()) > 256 {
		t.Fatalf("got %v (%d bytes)", status.Code(err), len(err.Error()))
	}
}
