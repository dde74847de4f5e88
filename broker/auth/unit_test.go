package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/imds"
)

// memStore is a Store in memory, for the tests that are not about etcd.
type memStore struct {
	mu       sync.Mutex
	secret   []byte
	bindings map[string]Binding
}

func (m *memStore) Secret(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secret == nil {
		m.secret = make([]byte, 32)
		_, _ = rand.Read(m.secret)
	}
	return m.secret, nil
}

func (m *memStore) Bind(_ context.Context, cand Binding) (Binding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur *Binding
	if b, ok := m.bindings[cand.InstanceID]; ok {
		cur = &b
	}
	out, write := decideBinding(cur, cand)
	if write {
		m.bindings[cand.InstanceID] = out
	}
	return out, nil
}

func (m *memStore) Forget(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.bindings, id)
	return nil
}

func signedDoc(t *testing.T, s *imds.Signer, doc string) (string, []byte) {
	t.Helper()
	sig, err := s.Sign([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	pem, err := s.CertificatePEM()
	if err != nil {
		t.Fatal(err)
	}
	return sig, pem
}

func TestVerifyDocument(t *testing.T) {
	s := imds.NewSigner("us-east-1")
	doc := `{"accountId":"123456789012","instanceId":"i-0123456789abcdef0","region":"us-east-1","instanceType":"m5.large","availabilityZone":"us-east-1a","pendingTime":"2026-01-02T03:04:05Z"}`
	sig, pem := signedDoc(t, s, doc)
	certs, err := ParseCertificates(pem)
	if err != nil {
		t.Fatal(err)
	}
	d, err := VerifyDocument(certs, []byte(doc), sig)
	if err != nil {
		t.Fatal(err)
	}
	if d.InstanceID != "i-0123456789abcdef0" || d.AccountID != "123456789012" || d.PendingTime.IsZero() {
		t.Fatalf("parsed %+v", d)
	}
	// The one-line form of the same signature verifies too.
	if _, err := VerifyDocument(certs, []byte(doc), strings.ReplaceAll(sig, "\n", "")); err != nil {
		t.Fatalf("signature without line breaks: %v", err)
	}
	other := imds.NewSigner("us-east-1")
	otherSig, otherPEM := signedDoc(t, other, doc)
	otherCerts, _ := ParseCertificates(otherPEM)
	unsignedFields, _ := signedDoc(t, s, `{"instanceId":"i-0123456789abcdef0"}`)
	for name, tc := range map[string]struct {
		certs []*x509.Certificate
		doc   string
		sig   string
	}{
		"altered document":      {certs, strings.Replace(doc, "m5.large", "m5.xlarge", 1), sig},
		"another key's signing": {certs, doc, otherSig},
		"not base64":            {certs, doc, "%%%"},
		"empty signature":       {certs, doc, ""},
		"wrong certificate":     {otherCerts, doc, sig},
		"signed, no account":    {certs, `{"instanceId":"i-0123456789abcdef0"}`, unsignedFields},
		"signature of nothing":  {certs, doc, base64.StdEncoding.EncodeToString(make([]byte, 256))},
	} {
		if _, err := VerifyDocument(tc.certs, []byte(tc.doc), tc.sig); !errors.Is(err, errBadDocument) {
			t.Errorf("%s: %v, want errBadDocument", name, err)
		}
	}
	if _, err := ParseCertificates([]byte("not pem")); err == nil {
		t.Error("ParseCertificates accepted garbage")
	}
}

func TestDecideBinding(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	a := Binding{InstanceID: "i-1", Key: []byte("key-a"), PendingTime: t0}
	b := Binding{InstanceID: "i-1", Key: []byte("key-b"), PendingTime: t0}
	bLater := Binding{InstanceID: "i-1", Key: []byte("key-b"), PendingTime: t0.Add(time.Hour)}
	bEarlier := Binding{InstanceID: "i-1", Key: []byte("key-b"), PendingTime: t0.Add(-time.Hour)}
	for _, tc := range []struct {
		name      string
		cur       *Binding
		cand      Binding
		wantKey   string
		wantWrite bool
	}{
		{"first attestation binds", nil, a, "key-a", true},
		{"same key again: no write", &a, a, "key-a", false},
		{"another key, same start: the first keeps it", &a, b, "key-a", false},
		{"another key after a restart: rebinds", &a, bLater, "key-b", true},
		{"another key with an older document: refused", &a, bEarlier, "key-a", false},
	} {
		got, write := decideBinding(tc.cur, tc.cand)
		if string(got.Key) != tc.wantKey || write != tc.wantWrite {
			t.Errorf("%s: key %s write %v, want %s %v", tc.name, got.Key, write, tc.wantKey, tc.wantWrite)
		}
	}
}

func TestTokenAndNonce(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	s := NewSigner(&memStore{}, clock)
	tok, err := s.Issue(ctx, Claims{InstanceID: "i-1", KeyID: "k", Expires: now.Add(time.Minute).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := s.Verify(ctx, tok); err != nil || c.InstanceID != "i-1" {
		t.Fatalf("verify: %+v %v", c, err)
	}
	// Another cluster's signer (another secret) does not accept it.
	if _, err := NewSigner(&memStore{}, clock).Verify(ctx, tok); !errors.Is(err, errBadToken) {
		t.Errorf("other cluster: %v", err)
	}
	// Claims edited to name another instance fail the MAC.
	i := strings.LastIndexByte(tok, '.')
	forged := tokenPrefix + b64.EncodeToString([]byte(`{"sub":"i-2","kid":"k","exp":9999999999999}`)) + tok[i:]
	for name, bad := range map[string]string{
		"forged claims": forged, "empty": "", "no prefix": "abc", "prefix only": "v1.",
		"huge": "v1." + strings.Repeat("A", 1<<20), "truncated": tok[:len(tok)-3],
	} {
		if _, err := s.Verify(ctx, bad); !errors.Is(err, errBadToken) {
			t.Errorf("%s: %v, want errBadToken", name, err)
		}
	}
	now = now.Add(time.Minute)
	if _, err := s.Verify(ctx, tok); !errors.Is(err, errBadToken) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired token: %v", err)
	}

	n, err := s.Nonce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckNonce(ctx, n); err != nil {
		t.Fatalf("fresh nonce: %v", err)
	}
	bad := append([]byte(nil), n...)
	bad[3] ^= 1 // move its timestamp
	if err := s.CheckNonce(ctx, bad); !errors.Is(err, errBadNonce) {
		t.Errorf("altered nonce: %v", err)
	}
	if err := NewSigner(&memStore{}, clock).CheckNonce(ctx, n); !errors.Is(err, errBadNonce) {
		t.Errorf("other cluster's nonce: %v", err)
	}
	now = now.Add(NonceTTL + time.Second)
	if err := s.CheckNonce(ctx, n); !errors.Is(err, errBadNonce) {
		t.Errorf("stale nonce: %v", err)
	}
}

func TestFingerprintStable(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	if Fingerprint(pub) != Fingerprint(append(ed25519.PublicKey(nil), pub...)) || len(Fingerprint(pub)) != 16 {
		t.Fatal("fingerprint")
	}
}
