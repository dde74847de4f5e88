package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// loadCA reads a PEM bundle into a pool.
func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA bundle %s: no PEM certificates found", path)
	}
	return pool, nil
}

// etcdTLS is the client TLS config for an external etcd, or nil for
// plaintext.
func etcdTLS(c config) (*tls.Config, error) {
	if c.etcdCACert == "" && c.etcdCert == "" && c.etcdKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.etcdCACert != "" {
		pool, err := loadCA(c.etcdCACert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		cfg.RootCAs = pool
	}
	if c.etcdCert != "" || c.etcdKey != "" {
		pair, err := tls.LoadX509KeyPair(c.etcdCert, c.etcdKey)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// serverTLS is the gRPC server's TLS config, or nil for plaintext. With a
// client CA a certificate presented must chain to it; none need be, since
// agents prove themselves with node tokens instead (broker/auth decides
// what each caller may do).
func serverTLS(c config) (*tls.Config, error) {
	if c.tlsCert == "" {
		return nil, nil
	}
	pair, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if c.tlsClientCA != "" {
		pool, err := loadCA(c.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-client-ca: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}
