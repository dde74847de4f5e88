package auth

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Service is allotv1.AuthService over an Attester.
type Service struct {
	allotv1.UnimplementedAuthServiceServer
	a *Attester
}

// NewService returns the AuthService for a.
func NewService(a *Attester) *Service { return &Service{a: a} }

// Challenge implements allotv1.AuthServiceServer.
func (s *Service) Challenge(ctx context.Context, _ *allotv1.ChallengeRequest) (*allotv1.ChallengeResponse, error) {
	n, err := s.a.cfg.Signer.Nonce(ctx)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "challenge: %v", err)
	}
	return &allotv1.ChallengeResponse{Nonce: n}, nil
}

// Attest implements allotv1.AuthServiceServer.
func (s *Service) Attest(ctx context.Context, req *allotv1.AttestRequest) (*allotv1.AttestResponse, error) {
	tok, c, err := s.a.Attest(ctx, Proof{
		Document: req.GetDocument(), Signature: req.GetSignature(), NodeKey: req.GetNodeKey(),
		Nonce: req.GetNonce(), NonceSignature: req.GetNonceSignature(),
	})
	if err != nil {
		return nil, err
	}
	return &allotv1.AttestResponse{Token: tok, InstanceId: c.InstanceID, ExpiresUnixMs: c.Expires}, nil
}
