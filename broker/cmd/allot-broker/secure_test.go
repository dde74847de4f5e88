package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/agent/attestation"
	"github.com/allotnet/allot/agent/identity"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/auth/devca"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// secure is a throwaway PKI and the awssim identity certificate, as files
// the broker is started with: TLS and attestation on, as in production.
type secure struct {
	ca  *devca.CA
	sim *awssim.Sim
	dir string
	// keys are the node keys by instance: a node attests with the same key
	// every time, as an agent with its key on the host does.
	keys map[string]ed25519.PrivateKey
}

func newSecure(t *testing.T, sim *awssim.Sim) *secure {
	t.Helper()
	ca, err := devca.New("allot-broker test CA")
	if err != nil {
		t.Fatal(err)
	}
	return &secure{ca: ca, sim: sim, dir: t.TempDir(), keys: map[string]ed25519.PrivateKey{}}
}

// args are the broker's flags: its server certificate, the client CA and
// awssim's identity certificate.
func (s *secure) args(t *testing.T) []string {
	t.Helper()
	leaf, err := s.ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := leaf.Write(s.dir, "broker")
	if err != nil {
		t.Fatal(err)
	}
	caPath, err := s.ca.WriteCert(s.dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := s.sim.IdentityCertificatePEM()
	if err != nil {
		t.Fatal(err)
	}
	idPath := filepath.Join(s.dir, "identity.pem")
	if err := os.WriteFile(idPath, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", caPath, "--identity-cert", idPath}
}

// dial connects over TLS with an optional client certificate naming uri.
func (s *secure) dial(t *testing.T, p *proc, uri string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: s.ca.Pool(), ServerName: "127.0.0.1"}
	if uri != "" {
		leaf, err := s.ca.Client("test "+uri, uri)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := leaf.TLS()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c, err := grpc.NewClient(p.addr, append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// admin connects as an operator (allotctl).
func (s *secure) admin(t *testing.T, p *proc) *grpc.ClientConn {
	return s.dial(t, p, auth.RoleURI(auth.RoleAdmin, ""))
}

// node connects as the agent on instance id does: attested with its own
// node key and its IMDS.
func (s *secure) node(t *testing.T, p *proc, id string) *grpc.ClientConn {
	t.Helper()
	url, err := s.sim.IMDSEndpoint(id)
	if err != nil {
		t.Fatal(err)
	}
	md, err := identity.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := s.keys[id]
	if !ok {
		_, key, _ = ed25519.GenerateKey(rand.Reader)
		s.keys[id] = key
	}
	creds, err := attestation.New(attestation.Config{IMDS: md, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	c := s.dial(t, p, "", creds.DialOptions()...)
	creds.Bind(allotv1.NewAuthServiceClient(c))
	return c
}
