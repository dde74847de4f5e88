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
	"strings"
	"sync"
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
}

// Credentials is a grpc.PerRPCCredentials carrying the node token. Bind
// the AuthService client of the same connection before the first call.
type Credentials struct {
	cfg Config

	mu      sync.Mutex // held while attesting, so concurrent calls share one
	client  AuthClient
	doc     identity.SignedDocument
	token   string
	expires time.Time
	issued  time.Time
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

// Token returns a token with at least half its life left, attesting for a
// new one otherwise.
func (c *Credentials) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if c.token != "" && now.Before(c.issued.Add(c.expires.Sub(c.issued)/2)) {
		return c.token, nil
	}
	if err := c.attestLocked(ctx); err != nil {
		// An error here fails the call that wanted the token; gRPC turns a
		// plain error into Unavailable, so the broker link retries as it
		// does for any unreachable broker. A refusal keeps its code.
		return "", err
	}
	return c.token, nil
}

// Invalidate drops the token, so the next call attests again.
func (c *Credentials) Invalidate() {
	c.mu.Lock()
	c.token = ""
	c.mu.Unlock()
}

func (c *Credentials) attestLocked(ctx context.Context) error {
	if c.client == nil {
		return errors.New("attest: no AuthService client bound")
	}
	if c.doc.Document == nil {
		sd, err := identity.FetchSignedDocument(ctx, c.cfg.IMDS)
		if err != nil {
			return fmt.Errorf("attest: %w", err)
		}
		c.doc = sd // static for the instance's life
	}
	ch, err := c.client.Challenge(ctx, &allotv1.ChallengeRequest{})
	if err != nil {
		return fmt.Errorf("attest: challenge: %w", err)
	}
	pub := c.cfg.Key.Public().(ed25519.PublicKey)
	resp, err := c.client.Attest(ctx, &allotv1.AttestRequest{
		Document: c.doc.Document, Signature: c.doc.Signature, NodeKey: pub, Nonce: ch.GetNonce(),
		NonceSignature: ed25519.Sign(c.cfg.Key, allotv1.AttestMessage(ch.GetNonce(), c.doc.Document)),
	})
	if err != nil {
		if s, ok := status.FromError(err); ok && (s.Code() == codes.PermissionDenied || s.Code() == codes.Unauthenticated) {
			c.cfg.Logger.Error("the broker refused this node's attestation", "code", s.Code().String(), "reason", s.Message())
		}
		return fmt.Errorf("attest: %w", err)
	}
	c.token, c.issued, c.expires = resp.GetToken(), c.cfg.Now(), time.UnixMilli(resp.GetExpiresUnixMs())
	c.cfg.Logger.Info("attested to the broker", "instance", resp.GetInstanceId(), "expires", c.expires)
	return nil
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
