package cluster

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/auth/devca"
)

// pki is the cluster's own certificates, made at start and written to the
// run directory, so the cluster runs with TLS and node attestation on, as
// production does: the broker's server certificate, awssim's identity
// document certificate for attestation, an operator certificate for the
// harness and a planner certificate for allotctl budgets. Agents get only
// the CA: they attest.
type pki struct {
	ca                                    *devca.CA
	caPath, brokerCert, brokerKey         string
	identityCert, plannerCert, plannerKey string
	adminCert, adminKey                   string
	admin                                 tls.Certificate
}

func newPKI(dir string, sim *awssim.Sim) (*pki, error) {
	dir = filepath.Join(dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := devca.New("allot one-machine cluster CA")
	if err != nil {
		return nil, err
	}
	p := &pki{ca: ca}
	if p.caPath, err = ca.WriteCert(dir, "ca"); err != nil {
		return nil, err
	}
	srv, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		return nil, err
	}
	if p.brokerCert, p.brokerKey, err = srv.Write(dir, "broker"); err != nil {
		return nil, err
	}
	planner, err := ca.Client("allotctl planner", auth.RoleURI(auth.RolePlanner, ""))
	if err != nil {
		return nil, err
	}
	if p.plannerCert, p.plannerKey, err = planner.Write(dir, "planner"); err != nil {
		return nil, err
	}
	admin, err := ca.Client("cluster harness", auth.RoleURI(auth.RoleAdmin, ""))
	if err != nil {
		return nil, err
	}
	if p.admin, err = admin.TLS(); err != nil {
		return nil, err
	}
	if p.adminCert, p.adminKey, err = admin.Write(dir, "admin"); err != nil {
		return nil, err
	}
	pem, err := sim.IdentityCertificatePEM()
	if err != nil {
		return nil, err
	}
	p.identityCert = filepath.Join(dir, "identity.pem")
	if err := os.WriteFile(p.identityCert, pem, 0o644); err != nil {
		return nil, fmt.Errorf("write identity certificate: %w", err)
	}
	return p, nil
}

// brokerArgs turn TLS, client certificates and attestation on.
func (p *pki) brokerArgs() []string {
	return []string{
		"--tls-cert=" + p.brokerCert, "--tls-key=" + p.brokerKey,
		"--tls-client-ca=" + p.caPath, "--identity-cert=" + p.identityCert,
	}
}

// agentArgs make the agent verify the broker and attest with a node key
// kept in its node directory. The broker's certificate names localhost:
// with several broker addresses the agent has no one host to verify.
func (p *pki) agentArgs(nodeDir string) []string {
	return []string{"--broker-ca=" + p.caPath, "--broker-server-name=localhost", "--node-key=" + filepath.Join(nodeDir, "node.key")}
}

// ctlArgs make allotctl a planner.
func (p *pki) ctlArgs() []string {
	return []string{"--cacert", p.caPath, "--cert", p.plannerCert, "--key", p.plannerKey}
}

// ctlAdminArgs make allotctl an operator (allotctl check).
func (p *pki) ctlAdminArgs() []string {
	return []string{"--cacert", p.caPath, "--cert", p.adminCert, "--key", p.adminKey}
}

// adminCreds are the harness's own: an operator.
func (p *pki) adminCreds() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: p.ca.Pool(), ServerName: "127.0.0.1",
		Certificates: []tls.Certificate{p.admin},
	})
}
