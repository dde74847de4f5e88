package auth

import (
	"context"
	"errors"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	grpcauth "github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Authorizer authenticates every call and holds it to the policy (see
// methods) before any handler runs, so a refused call reaches neither etcd
// nor EC2. The rule from credential to role:
//
//   - "authorization: Bearer <token>" with a node token from Attest: the
//     node role for the token's instance. A token that does not verify is
//     refused even if a certificate is also presented.
//   - otherwise a client certificate that chains to the broker's client CA:
//     the role its allot:// URI SAN names (allot://admin, allot://planner,
//     allot://node/<instance-id>); none, no role.
//   - otherwise the caller is unauthenticated.
//
// No credential, or one that does not verify, is Unauthenticated; a caller
// whose role may not call the method, or a node acting for another
// instance, is PermissionDenied.
type Authorizer struct {
	signer *Signer
}

// NewAuthorizer returns an Authorizer that verifies node tokens with signer.
func NewAuthorizer(signer *Signer) *Authorizer { return &Authorizer{signer: signer} }

// UnaryServerInterceptor authenticates and authorizes unary calls.
func (z *Authorizer) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	authn := selector.UnaryServerInterceptor(grpcauth.UnaryServerInterceptor(z.authenticate), needsCredential)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return authn(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			if err := authorize(ctx, info.FullMethod, req); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		})
	}
}

// StreamServerInterceptor authenticates and authorizes streaming calls;
// a node's every request message is held to its own instance.
func (z *Authorizer) StreamServerInterceptor() grpc.StreamServerInterceptor {
	authn := selector.StreamServerInterceptor(grpcauth.StreamServerInterceptor(z.authenticate), needsCredential)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return authn(srv, ss, info, func(srv any, ss grpc.ServerStream) error {
			if err := authorize(ss.Context(), info.FullMethod, nil); err != nil {
				return err
			}
			p, _ := FromContext(ss.Context())
			if p.Role == RoleNode && isNodeMethod(info.FullMethod) {
				ss = &nodeStream{ServerStream: ss, method: info.FullMethod}
			}
			return handler(srv, ss)
		})
	}
}

var needsCredential = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
	return !isPublic(c.FullMethod())
})

// authenticate finds the caller's principal (see Authorizer for the rule).
func (z *Authorizer) authenticate(ctx context.Context) (context.Context, error) {
	tok, present, err := bearerToken(ctx)
	if err != nil {
		return nil, status.Error(codes.Unauthenticated, err.Error())
	}
	if present {
		c, err := z.signer.Verify(ctx, tok)
		switch {
		case errors.Is(err, errBadToken):
			return nil, status.Error(codes.Unauthenticated, err.Error())
		case err != nil:
			return nil, status.Errorf(codes.Unavailable, "check token: %v", err)
		}
		return WithPrincipal(ctx, Principal{Role: RoleNode, InstanceID: c.InstanceID, Via: "token key=" + c.KeyID}), nil
	}
	if cert := peerCertificate(ctx); cert != nil {
		return WithPrincipal(ctx, certPrincipal(cert)), nil
	}
	return nil, status.Error(codes.Unauthenticated,
		"no credential: a node attests (AuthService.Attest) and sends its token; planners and operators present a client certificate")
}

// authorize holds an authenticated call to the policy; req is nil for a
// stream's start.
func authorize(ctx context.Context, method string, req any) error {
	if isPublic(method) {
		return nil
	}
	p, ok := FromContext(ctx)
	if !ok {
		return status.Error(codes.Unauthenticated, "no credential")
	}
	if !allowed(method, p.Role) {
		role := string(p.Role)
		if role == "" {
			role = "no role"
		}
		return status.Errorf(codes.PermissionDenied, "%s (%s) may not call %s", role, p.Via, method)
	}
	if req != nil && p.Role == RoleNode && isNodeMethod(method) {
		return sameInstance(p, req)
	}
	return nil
}

// sameInstance lets a node act only for its own instance.
func sameInstance(p Principal, req any) error {
	id, ok := instanceOf(req)
	if !ok {
		return status.Error(codes.PermissionDenied, "request names no instance")
	}
	if id != p.InstanceID {
		return status.Errorf(codes.PermissionDenied, "node %s may act only for itself, not for %s", p.InstanceID, short(id))
	}
	return nil
}

// nodeStream checks each message a node sends on a stream.
type nodeStream struct {
	grpc.ServerStream
	method string
}

func (s *nodeStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	p, _ := FromContext(s.Context())
	return sameInstance(p, m)
}
