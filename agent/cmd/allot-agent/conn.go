package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/allotnet/allot/agent/attestation"
	"github.com/allotnet/allot/agent/brokerlink"
	"github.com/allotnet/allot/agent/identity"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// dialBroker returns a connection to the brokers. Every broker replica
// serves agents from etcd, so any one will do: with several addresses the
// connection tries them in turn (pick_first) and moves on when one stops
// answering.
func dialBroker(c config, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	creds, err := brokerCreds(c)
	if err != nil {
		return nil, err
	}
	// otelgrpc carries the trace context of a waiting ADD to the broker
	// (the global providers main installed).
	opts := append(append(brokerlink.DialOptions(), extra...), grpc.WithTransportCredentials(creds),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()))
	target := c.brokers[0]
	if len(c.brokers) > 1 {
		r := manual.NewBuilderWithScheme("allot-brokers")
		addrs := make([]resolver.Address, 0, len(c.brokers))
		for _, b := range c.brokers {
			addrs = append(addrs, resolver.Address{Addr: b})
		}
		r.InitialState(resolver.State{Addresses: addrs})
		opts = append(opts, grpc.WithResolvers(r))
		target = r.Scheme() + ":///brokers"
	}
	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("broker connection: %w", err)
	}
	return conn, nil
}

// connectBroker dials the brokers with the node's credential: over TLS
// without a client certificate, the agent attests (agent/attestation) and its
// calls carry the node token; with --broker-cert the certificate speaks
// for the node.
func connectBroker(c config, md identity.DynamicAPI, log *slog.Logger) (*grpc.ClientConn, error) {
	if c.brokerCA == "" || c.brokerCert != "" {
		return dialBroker(c)
	}
	key, err := attestation.LoadOrCreateKey(c.nodeKey)
	if err != nil {
		return nil, fmt.Errorf("--node-key: %w", err)
	}
	creds, err := attestation.New(attestation.Config{IMDS: md, Key: key, Logger: log.With("component", "attest")})
	if err != nil {
		return nil, err
	}
	conn, err := dialBroker(c, creds.DialOptions()...)
	if err != nil {
		return nil, err
	}
	creds.Bind(allotv1.NewAuthServiceClient(conn))
	return conn, nil
}

// brokerCreds is TLS (mutual with a client certificate) when a CA is given,
// plaintext otherwise.
func brokerCreds(c config) (credentials.TransportCredentials, error) {
	if c.brokerCA == "" {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(c.brokerCA)
	if err != nil {
		return nil, fmt.Errorf("--broker-ca: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--broker-ca %s: no PEM certificates found", c.brokerCA)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, ServerName: c.brokerServerName}
	if c.brokerCert != "" {
		pair, err := tls.LoadX509KeyPair(c.brokerCert, c.brokerKey)
		if err != nil {
			return nil, fmt.Errorf("--broker-cert/--broker-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
