package burst

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/agent/attestation"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/server"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// The benchmark runs allot as production does: the broker serves TLS and
// every agent attests its instance (docs/security.md). The harness makes a
// CA at start and writes it, the broker's certificate and awssim's identity
// certificate into a directory the broker (perhaps a child process) reads.
const (
	pkiCA       = "ca.crt"
	pkiCert     = "broker.crt"
	pkiKey      = "broker.key"
	pkiIdentity = "identity.pem"
)

// writePKI makes the directory's certificates; identity is awssim's.
func writePKI(dir string, identityPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := devca.New("allot-burst CA")
	if err != nil {
		return err
	}
	if _, err := ca.WriteCert(dir, "ca"); err != nil {
		return err
	}
	leaf, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		return err
	}
	if _, _, err := leaf.Write(dir, "broker"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, pkiIdentity), identityPEM, 0o644)
}

// identityCertificate fetches awssim's identity certificate from its admin
// API.
func (a *admin) identityCertificate(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/v1/identity-certificate", nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("awssim identity certificate: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("awssim identity certificate: %s %v", resp.Status, err)
	}
	return b, nil
}

// brokerSecurity is the broker's TLS option and attestation config from
// the directory.
func brokerSecurity(dir string) ([]grpc.ServerOption, *brokerd.AuthConfig, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, pkiCert), filepath.Join(dir, pkiKey))
	if err != nil {
		return nil, nil, fmt.Errorf("bench broker TLS: %w", err)
	}
	certs, err := auth.LoadCertificates(filepath.Join(dir, pkiIdentity))
	if err != nil {
		return nil, nil, err
	}
	opts := server.TLS(&tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}})
	return opts, &brokerd.AuthConfig{IdentityCertificates: certs}, nil
}

// agentTLS verifies the broker with the directory's CA.
func agentTLS(dir string) (credentials.TransportCredentials, error) {
	ca, err := os.ReadFile(filepath.Join(dir, pkiCA))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
	cfg.RootCAs = x509.NewCertPool()
	if !cfg.RootCAs.AppendCertsFromPEM(ca) {
		return nil, errNoCA
	}
	return credentials.NewTLS(cfg), nil
}

// agentCredentials is one agent's attestation: its own node key and its
// instance's IMDS, logging to the harness's log.
func agentCredentials(md identity.DynamicAPI, log *slog.Logger) (*attestation.Credentials, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	return attestation.New(attestation.Config{IMDS: md, Key: key, Logger: log})
}

// bindAttestation points an agent's credentials at its connection.
func bindAttestation(c *attestation.Credentials, conn *grpc.ClientConn) {
	c.Bind(allotv1.NewAuthServiceClient(conn))
}

var errNoCA = errors.New("bench: no PEM certificate in the CA file")
