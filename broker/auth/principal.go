package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Role is what a caller may do.
type Role string

// The roles. RoleNone is an authenticated caller whose credential names no
// role: it may call nothing that needs one.
const (
	RoleNone    Role = ""
	RoleNode    Role = "node"
	RolePlanner Role = "planner"
	RoleAdmin   Role = "admin"
)

// Principal is an authenticated caller.
type Principal struct {
	Role Role
	// InstanceID is the node's instance, for RoleNode.
	InstanceID string
	// Via says what proved it, for logs: "token key=<fingerprint>" or
	// "certificate <subject>".
	Via string
}

type principalKey struct{}

// FromContext returns the caller the interceptors authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// URIScheme is the scheme of the certificate URI SANs that name roles.
const URIScheme = "allot"

// RoleURI is the URI SAN that gives a certificate a role: allot://admin,
// allot://planner, or allot://node/<instance-id> for a per-node
// certificate.
func RoleURI(r Role, instanceID string) string {
	if r == RoleNode {
		return URIScheme + "://node/" + instanceID
	}
	return URIScheme + "://" + string(r)
}

// certPrincipal maps a verified client certificate to a principal: the
// first URI SAN with the allot scheme names the role; a certificate with
// none authenticates its holder but grants nothing.
func certPrincipal(c *x509.Certificate) Principal {
	via := "certificate " + short(c.Subject.String())
	for _, u := range c.URIs {
		if p, ok := uriPrincipal(u); ok {
			p.Via = via
			return p
		}
	}
	return Principal{Role: RoleNone, Via: via}
}

func uriPrincipal(u *url.URL) (Principal, bool) {
	if u.Scheme != URIScheme {
		return Principal{}, false
	}
	switch Role(u.Host) {
	case RoleAdmin, RolePlanner:
		if u.Path == "" || u.Path == "/" {
			return Principal{Role: Role(u.Host)}, true
		}
	case RoleNode:
		if id := strings.TrimPrefix(u.Path, "/"); id != "" && !strings.Contains(id, "/") {
			return Principal{Role: RoleNode, InstanceID: id}, true
		}
	}
	return Principal{}, false
}

// peerCertificate is the caller's client certificate, if it presented one
// that chains to the configured client CA.
func peerCertificate(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

// bearerToken is the call's "authorization: Bearer" token; ok is false
// without the header. More than one header is an error.
func bearerToken(ctx context.Context) (string, bool, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	switch len(vals) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, fmt.Errorf("%d authorization headers, want one", len(vals))
	}
	scheme, tok, found := strings.Cut(vals[0], " ")
	if !found || !strings.EqualFold(scheme, "bearer") {
		return "", true, fmt.Errorf("authorization header is not \"Bearer <token>\"")
	}
	return strings.TrimSpace(tok), true, nil
}

// shortLimit bounds how much of a caller-supplied value an error or log
// line quotes.
const shortLimit = 48

// short quotes at most shortLimit bytes of v, noting the full length.
func short(v string) string {
	if len(v) <= shortLimit {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:shortLimit], len(v))
}
