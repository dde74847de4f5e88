package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/broker/instanceview"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// InstanceSource is what attestation asks EC2 (broker/instances' Cache).
type InstanceSource interface {
	Get(ctx context.Context, id string) (instanceview.Instance, error)
}

var _ InstanceSource = (*instanceview.Cache)(nil)

// AttestConfig configures an Attester.
type AttestConfig struct {
	// Certificates verify identity document signatures (required).
	Certificates []*x509.Certificate
	// Region is the broker's; documents from other regions are refused.
	Region string
	// AccountID, if set, is the only account whose instances may attest.
	// Either way the document's account must own the instance as EC2
	// describes it, which only the broker's own account can see.
	AccountID string
	// VPCIDs, if set, are the VPCs attesting instances must be in.
	VPCIDs []string
	// TokenTTL is how long a node token is accepted; 15 minutes if zero.
	TokenTTL time.Duration

	Instances InstanceSource
	Store     Store
	Signer    *Signer
	Logger    *slog.Logger
	Now       func() time.Time
}

// DefaultTokenTTL is a node token's lifetime; agents attest again at half
// of it.
const DefaultTokenTTL = 15 * time.Minute

// Attester turns a proof of an instance's identity into a node token.
type Attester struct{ cfg AttestConfig }

// NewAttester checks cfg and returns an Attester.
func NewAttester(cfg AttestConfig) (*Attester, error) {
	switch {
	case len(cfg.Certificates) == 0:
		return nil, errors.New("attestation: an identity document certificate is required")
	case cfg.Region == "":
		return nil, errors.New("attestation: the region is required")
	case cfg.Instances == nil || cfg.Store == nil || cfg.Signer == nil:
		return nil, errors.New("attestation: instances, store and signer are required")
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = DefaultTokenTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Attester{cfg: cfg}, nil
}

// Proof is what an agent presents (allotv1.AttestRequest).
type Proof struct {
	Document       []byte
	Signature      string
	NodeKey        ed25519.PublicKey
	Nonce          []byte
	NonceSignature []byte
}

// Attest checks p and returns a token for the proven instance. A proof
// that does not hold is Unauthenticated; a proven instance the broker must
// not serve (another account, region or VPC, not running, bound to another
// node key) is PermissionDenied. Only a correctly signed document leads to
// an EC2 call, and the cache makes that one per instance per TTL.
func (a *Attester) Attest(ctx context.Context, p Proof) (string, Claims, error) {
	if err := a.cfg.Signer.CheckNonce(ctx, p.Nonce); err != nil {
		return "", Claims{}, status.Error(codes.Unauthenticated, err.Error())
	}
	doc, err := VerifyDocument(a.cfg.Certificates, p.Document, p.Signature)
	if err != nil {
		return "", Claims{}, status.Error(codes.Unauthenticated, err.Error())
	}
	if len(p.NodeKey) != ed25519.PublicKeySize || !ed25519.Verify(p.NodeKey, allotv1.AttestMessage(p.Nonce, p.Document), p.NonceSignature) {
		return "", Claims{}, status.Errorf(codes.Unauthenticated, "node key signature over the challenge does not verify")
	}
	if err := a.checkInstance(ctx, doc); err != nil {
		return "", Claims{}, err
	}
	kid := Fingerprint(p.NodeKey)
	b, err := a.cfg.Store.Bind(ctx, Binding{
		InstanceID: doc.InstanceID, Key: p.NodeKey, PendingTime: doc.PendingTime, BoundAt: a.cfg.Now(),
	})
	if err != nil {
		return "", Claims{}, status.Errorf(codes.Unavailable, "attestation: %v", err)
	}
	if got := Fingerprint(b.Key); got != kid {
		return "", Claims{}, status.Errorf(codes.PermissionDenied,
			"instance %s is bound to node key %s since %s, not %s: an identity document alone does not prove a node "+
				"(if the node lost its key, an operator removes the binding)", doc.InstanceID, got, b.BoundAt.UTC().Format(time.RFC3339), kid)
	}
	now := a.cfg.Now()
	c := Claims{InstanceID: doc.InstanceID, KeyID: kid, IssuedAt: now.UnixMilli(), Expires: now.Add(a.cfg.TokenTTL).UnixMilli()}
	tok, err := a.cfg.Signer.Issue(ctx, c)
	if err != nil {
		return "", Claims{}, status.Errorf(codes.Unavailable, "attestation: %v", err)
	}
	a.cfg.Logger.Info("node attested", "instance", doc.InstanceID, "node_key", kid, "expires", time.UnixMilli(c.Expires))
	return tok, c, nil
}

// checkInstance holds the signed document against the broker's settings
// and against EC2.
func (a *Attester) checkInstance(ctx context.Context, doc Document) error {
	deny := func(format string, args ...any) error {
		return status.Errorf(codes.PermissionDenied, "instance %s: "+format, append([]any{doc.InstanceID}, args...)...)
	}
	if doc.Region != a.cfg.Region {
		return deny("document is from region %s, this broker serves %s", doc.Region, a.cfg.Region)
	}
	if a.cfg.AccountID != "" && doc.AccountID != a.cfg.AccountID {
		return deny("document is from account %s, this broker serves %s", doc.AccountID, a.cfg.AccountID)
	}
	in, err := a.cfg.Instances.Get(ctx, doc.InstanceID)
	switch {
	case errors.Is(err, instanceview.ErrNotFound):
		return deny("EC2 does not know it in this broker's account and region")
	case err != nil:
		return status.Errorf(codes.Unavailable, "attestation: %v", err)
	}
	switch {
	case in.OwnerID != doc.AccountID:
		return deny("EC2 says account %s owns it, the document says %s", in.OwnerID, doc.AccountID)
	case in.State != "running":
		return deny("EC2 says it is %s, not running", in.State)
	case in.AZ != doc.AvailabilityZone:
		return deny("EC2 says zone %s, the document says %s", in.AZ, doc.AvailabilityZone)
	case in.Type != doc.InstanceType:
		return deny("EC2 says type %s, the document says %s", in.Type, doc.InstanceType)
	case len(a.cfg.VPCIDs) > 0 && !slices.Contains(a.cfg.VPCIDs, in.VPCID):
		return deny("it is in %s, this broker serves %v", in.VPCID, a.cfg.VPCIDs)
	}
	return nil
}
