package brokerd

import (
	"crypto/x509"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/instanceview"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// AuthConfig turns on who-may-call-what (broker/auth): every call needs a
// node token from attestation or a client certificate naming a role. Both
// need TLS, which GRPC.Options must provide (grpc.Creds, with
// tls.VerifyClientCertIfGiven and the client CA when certificates are
// used).
type AuthConfig struct {
	// IdentityCertificates verify instance identity documents; without
	// them there is no attestation and nodes need per-node certificates.
	IdentityCertificates []*x509.Certificate
	// AccountID and VPCIDs, if set, restrict which instances may attest.
	AccountID string
	VPCIDs    []string
	// TokenTTL is a node token's lifetime; auth.DefaultTokenTTL if zero.
	TokenTTL time.Duration
}

// buildAuth makes the authorizer's interceptors and the AuthService; the
// instance view is the broker's shared one, so attestation and
// registration together cost one DescribeInstances per node.
func (b *Broker) buildAuth(cli *clientv3.Client, view *instanceview.Cache) (*auth.Authorizer, allotv1.AuthServiceServer, error) {
	ac := b.cfg.Auth
	st := auth.NewEtcdStore(cli, b.st.Prefix())
	signer := auth.NewSigner(st, nil)
	z := auth.NewAuthorizer(signer)
	if len(ac.IdentityCertificates) == 0 {
		return z, nil, nil
	}
	if b.cfg.EC2.Region == "" {
		return nil, nil, errors.New("brokerd: attestation needs the EC2 region")
	}
	att, err := auth.NewAttester(auth.AttestConfig{
		Certificates: ac.IdentityCertificates, Region: b.cfg.EC2.Region, AccountID: ac.AccountID, VPCIDs: ac.VPCIDs,
		TokenTTL: ac.TokenTTL, Instances: view, Store: st, Signer: signer, Logger: b.log.With("component", "auth"),
	})
	if err != nil {
		return nil, nil, err
	}
	return z, auth.NewService(att), nil
}
