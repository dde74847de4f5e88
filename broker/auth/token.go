package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Claims are what a node token says: which instance, under which node key,
// until when.
type Claims struct {
	InstanceID string `json:"sub"`
	KeyID      string `json:"kid"`
	IssuedAt   int64  `json:"iat"`
	Expires    int64  `json:"exp"`
}

var (
	errBadToken   = errors.New("token not valid")
	errBadNonce   = errors.New("challenge not valid")
	b64           = base64.RawURLEncoding
	tokenPrefix   = "v1."
	tokenContext  = []byte("allot-token-v1")
	nonceContext  = []byte("allot-challenge-v1")
	maxTokenBytes = 1024
)

// Signer issues and checks node tokens and challenge nonces with the
// cluster's secret (Store.Secret), so any replica accepts what another
// issued. A token is "v1." + base64url(JSON claims) + "." +
// base64url(HMAC-SHA256); a nonce is a timestamp, 16 random bytes and their
// HMAC, so checking one needs no shared state beyond the secret.
type Signer struct {
	store Store
	now   func() time.Time

	mu     sync.Mutex
	secret []byte
	// verified holds the claims of tokens whose MAC checked, by the token's
	// whole text: a node presents the same token on every call until it
	// attests again, and the secret never changes under a running Signer,
	// so the same bytes would check the same again. Expiry is still checked
	// on every call. It is emptied when it reaches maxVerified (a node
	// renews its token well before it expires, so at most a few per node).
	verified map[string]Claims
}

// maxVerified bounds Signer.verified: a few tokens each for the largest
// clusters allot is measured at.
const maxVerified = 1 << 15

// NewSigner returns a Signer over store; now nil means time.Now.
func NewSigner(store Store, now func() time.Time) *Signer {
	if now == nil {
		now = time.Now
	}
	return &Signer{store: store, now: now}
}

func (s *Signer) key(ctx context.Context, purpose []byte) ([]byte, error) {
	s.mu.Lock()
	secret := s.secret
	s.mu.Unlock()
	if secret == nil {
		var err error
		if secret, err = s.store.Secret(ctx); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.secret = secret
		s.mu.Unlock()
	}
	m := hmac.New(sha256.New, secret)
	m.Write(purpose)
	return m.Sum(nil), nil
}

func mac(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// Issue signs c into a token.
func (s *Signer) Issue(ctx context.Context, c Claims) (string, error) {
	key, err := s.key(ctx, tokenContext)
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	payload := tokenPrefix + b64.EncodeToString(body)
	return payload + "." + b64.EncodeToString(mac(key, []byte(payload))), nil
}

// Verify checks a token's MAC and expiry and returns its claims.
func (s *Signer) Verify(ctx context.Context, tok string) (Claims, error) {
	s.mu.Lock()
	c, ok := s.verified[tok]
	s.mu.Unlock()
	if !ok {
		var err error
		if c, err = s.check(ctx, tok); err != nil {
			return Claims{}, err
		}
		s.mu.Lock()
		if s.verified == nil || len(s.verified) >= maxVerified {
			s.verified = make(map[string]Claims)
		}
		s.verified[tok] = c
		s.mu.Unlock()
	}
	if !s.now().Before(time.UnixMilli(c.Expires)) {
		return Claims{}, fmt.Errorf("%w: expired at %s; attest again", errBadToken, time.UnixMilli(c.Expires).UTC().Format(time.RFC3339))
	}
	return c, nil
}

// check verifies a token's MAC and decodes its claims.
func (s *Signer) check(ctx context.Context, tok string) (Claims, error) {
	if len(tok) > maxTokenBytes || !strings.HasPrefix(tok, tokenPrefix) {
		return Claims{}, fmt.Errorf("%w: not an allot node token", errBadToken)
	}
	i := strings.LastIndexByte(tok, '.')
	payload, sig := tok[:i], tok[i+1:]
	got, err := b64.DecodeString(sig)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: malformed", errBadToken)
	}
	key, err := s.key(ctx, tokenContext)
	if err != nil {
		return Claims{}, err
	}
	if !hmac.Equal(got, mac(key, []byte(payload))) {
		return Claims{}, fmt.Errorf("%w: not signed by this cluster", errBadToken)
	}
	body, err := b64.DecodeString(strings.TrimPrefix(payload, tokenPrefix))
	var c Claims
	if err != nil || json.Unmarshal(body, &c) != nil || c.InstanceID == "" {
		return Claims{}, fmt.Errorf("%w: malformed claims", errBadToken)
	}
	return c, nil
}

// NonceTTL is how long a challenge nonce is accepted.
const NonceTTL = time.Minute

// Nonce returns a fresh challenge nonce.
func (s *Signer) Nonce(ctx context.Context) ([]byte, error) {
	key, err := s.key(ctx, nonceContext)
	if err != nil {
		return nil, err
	}
	n := make([]byte, 8+16, 8+16+16)
	binary.BigEndian.PutUint64(n, uint64(s.now().UnixMilli()))
	if _, err := rand.Read(n[8:]); err != nil {
		return nil, err
	}
	return append(n, mac(key, n)[:16]...), nil
}

// CheckNonce accepts a nonce this cluster issued less than NonceTTL ago.
func (s *Signer) CheckNonce(ctx context.Context, n []byte) error {
	if len(n) != 40 {
		return fmt.Errorf("%w: wrong length; call Challenge", errBadNonce)
	}
	key, err := s.key(ctx, nonceContext)
	if err != nil {
		return err
	}
	if !hmac.Equal(n[24:], mac(key, n[:24])[:16]) {
		return fmt.Errorf("%w: not issued by this cluster; call Challenge", errBadNonce)
	}
	age := s.now().Sub(time.UnixMilli(int64(binary.BigEndian.Uint64(n))))
	if age < -5*time.Second || age > NonceTTL {
		return fmt.Errorf("%w: issued %s ago, accepted for %s; call Challenge again", errBadNonce, age.Round(time.Second), NonceTTL)
	}
	return nil
}
