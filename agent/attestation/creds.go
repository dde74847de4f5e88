// Package attestation gives the agent's broker connection its credential: it
// proves the node's instance to the broker with the signed instance
// identity document from IMDS and the node's own key (AuthService), and
// puts the node token it gets on every NodeService call, attesting again
// before the token expires or when the broker refuses it.
package attestation

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/identity"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// AuthClient is the broker's AuthService as the agent calls it.
type AuthClient interface {
	Challenge(ctx context.Context, in *allotv1.ChallengeRequest, opts ...grpc.CallOption) (*allotv1.ChallengeResponse, error)
	Attest(ctx context.Context, in *allotv1.AttestRequest, opts ...grpc.CallOption) (*allotv1.AttestResponse, error)
}

// Config configures Credentials.
type Config struct {
	IMDS   identity.DynamicAPI
	Key    ed25519.PrivateKey
	Logger *slog.Logger
	Now    func() time.Time
	// Rand returns a number in [0, 1) that places a token's renewal
	// within its life (see Token); rand.Float64 if nil.
	Rand func() float64
}

// Renewal bounds: a token is renewed in the background from renewFrom of
// its life plus up to renewSpread, drawn for each token, so that nodes
// that joined together do not all attest again in the same second; a call
// waits for an attestation only once less than mustRenew of the token's
// life is left (or there is none).
const (
	renewFrom   = 0.5
	renewSpread = 0.2
	mustRenew   = 0.1
	// backgroundAttest bounds one background renewal.
	backgroundAttest = 30 * time.Second
)

// Credentials is a grpc.PerRPCCredentials carrying the node token. Bind
// the AuthService client of the same connection before the first call.
type Credentials struct {
	cfg Config

	attesting sync.Mutex // held while attesting, so concurrent calls share one
	doc       identity.SignedDocument
	renewing  atomic.Bool // a background renewal is running

	mu      sync.Mutex // guards the fields below; never held across a call
	client  AuthClient
	token   string
	issued  time.Time
	expires time.Time
	renewAt time.Time // from when a call starts a background renewal
	due     time.Time // from when a call must wait for a new token
}

var _ credentials.PerRPCCredentials = (*Credentials)(nil)

// New returns Credentials for cfg.
func New(cfg Config) (*Credentials, error) {
	if cfg.IMDS == nil || cfg.Key == nil {
		return nil, errors.New("attest: IMDS client and node key are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Credentials{cfg: cfg}, nil
}

// Bind sets the AuthService client attestations go through.
func (c *Credentials) Bind(client AuthClient) {
	c.mu.Lock()
	c.client = client
	c.mu.Unlock()
}

// authService is the prefix of the calls that carry no token.
var authService = "/" + allotv1.AuthService_ServiceDesc.ServiceName + "/"

// GetRequestMetadata implements credentials.PerRPCCredentials: the token,
// except on AuthService calls, which are how a token is got.
func (c *Credentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if ri, ok := credentials.RequestInfoFromContext(ctx); ok && strings.HasPrefix(ri.Method, authService) {
		return nil, nil
	}
	tok, err := c.Token(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]string{"authorization": "Bearer " + tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: a
// token is never sent in the clear.
func (c *Credentials) RequireTransportSecurity() bool { return true }

// Token returns the node token. Past its renewal time (half its life
// plus up to a fifth, drawn per token) a call starts a renewal in the
// background and goes on with the token it has; only a call that finds no
// token, or one with less than a tenth of its life left, waits for an
// attestation. A node's calls (its demand in a burst among them) so never
// wait for a renewal the broker is slow to answer while their token is
// still good, and a fleet that joined within minutes spreads its
// renewals over a fifth of a token's life.
func (c *Credentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	tok, renewAt, due := c.token, c.renewAt, c.due
	c.mu.Unlock()
	now := c.cfg.Now()
	if tok != "" && now.Before(due) {
		if !now.Before(renewAt) {
			c.renewInBackground(ctx)
		}
		return tok, nil
	}
	c.attesting.Lock()
	defer c.attesting.Unlock()
	c.mu.Lock()
	tok, due = c.token, c.due
	c.mu.Unlock()
	if tok != "" && c.cfg.Now().Before(due) {
		return tok, nil // another call attested while this one waited
	}
	tok, err := c.attestLocked(ctx)
	if err != nil {
		// An error here fails the call that wanted the token; gRPC turns a
		// plain error into Unavailable, so the broker link retries as it
		// does for any unreachable broker. A refusal keeps its code.
		return "", err
	}
	return tok, nil
}

// renewInBackground attests for a new token unless a renewal is already
// running. A renewal that fails leaves the token as it is; a later call
// tries again, at most once per tenth of the token's life.
func (c *Credentials) renewInBackground(ctx context.Context) {
	if !c.renewing.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.renewing.Store(false)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundAttest)
		defer cancel()
		c.attesting.Lock()
		defer c.attesting.Unlock()
		c.mu.Lock()
		fresh := c.token != "" && c.cfg.Now().Before(c.renewAt)
		c.mu.Unlock()
		if fresh {
			return // a call attested while this one waited
		}
		if _, err := c.attestLocked(rctx); err != nil {
			c.cfg.Logger.Warn("renewing the node token in the background; the current one is still good", "err", err)
			c.mu.Lock()
			c.renewAt = c.cfg.Now().Add(time.Duration(mustRenew * float64(c.expires.Sub(c.issued))))
			c.mu.Unlock()
		}
	}()
}

// Invalidate drops the token, so the next call attests again.
func (c *Credentials) Invalidate() {
	c.mu.Lock()
	c.token = ""
	c.mu.Unlock()
}

// attestLocked attests for a new token and keeps it; c.attesting is held.
func (c *Credentials) attestLocked(ctx context.Context) (string, error) {
	c.mu.Lock()
	client := c.client
	c.mu.Unlock()
	if client == nil {
		return "", errors.New("attest: no AuthService client bound")
	}
	if c.doc.Document == nil {
		sd, err := identity.FetchSignedDocument(ctx, c.cfg.IMDS)
		if err != nil {
			return "", fmt.Errorf("attest: %w", err)
		}
		c.doc = sd // static for the instance's life
	}
	ch, err := client.Challenge(ctx, &allotv1.ChallengeRequest{})
	if err != nil {
		return "", fmt.Errorf("attest: challenge: %w", err)
	}
	pub := c.cfg.Key.Public().(ed25519.PublicKey)
	resp, err := client.Attest(ctx, &allotv1.AttestRequest{
		Document: c.doc.Document, Signature: c.doc.Signature, NodeKey: pub, Nonce: ch.GetNonce(),
		NonceSignature: ed25519.Sign(c.cfg.Key, allotv1.AttestMessage(ch.GetNonce(), c.doc.Document)),
	})
	if err != nil {
		if s, ok := status.FromError(err); ok && (s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			c.cfg.Logger.Error("the broker refused this node's attestation", "code", s.Code().String(), "reason", s.Message())
		}
		return "", fmt.Errorf("attest: %w", err)
	}
	issued, expires := c.cfg.Now(), time.UnixMilli(resp.GetExpiresUnixMs())
	life := float64(expires.Sub(issued))
	c.mu.Lock()
	c.token, c.issued, c.expires = resp.GetToken(), issued, expires
	c.renewAt = issued.Add(time.Duration(life * (renewFrom + renewSpread*c.cfg.Rand())))
	c.due = expires.Add(-time.Duration(life * mustRenew))
	c.mu.Unlock()
	c.cfg.Logger.Info("attested to the broker", "instance", resp.GetInstanceId(), "expires", expires)
	return resp.GetToken(), nil
}

// UnaryClientInterceptor drops the token when the broker answers
// Unauthenticated (it expired early, or the cluster's secret was
// rotated), so the retry attests again.
func (c *Credentials) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		c.dropOn(method, err)
		return err
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for opening streams.
func (c *Credentials) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		c.dropOn(method, err)
		return s, err
	}
}

func (c *Credentials) dropOn(method string, err error) {
	if status.Code(err) == codes.Unauthenticated && !strings.HasPrefix(method, authService) {
		c.Invalidate()
	}
}

// DialOptions are what a connection needs to carry the credential.
func (c *Credentials) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithPerRPCCredentials(c),
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor()),
	}
}
