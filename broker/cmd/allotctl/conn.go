package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// client holds the connection and the broker's service clients.
type client struct {
	conn   *grpc.ClientConn
	budget allotv1.BudgetServiceClient
	admin  allotv1.AdminServiceClient
	podnet allotv1.PodNetworkServiceClient
}

func dial(o *options) (*client, error) {
	creds, err := transportCredentials(o)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(o.broker, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("connect to broker %s: %w", o.broker, err)
	}
	return &client{
		conn:   conn,
		budget: allotv1.NewBudgetServiceClient(conn),
		admin:  allotv1.NewAdminServiceClient(conn),
		podnet: allotv1.NewPodNetworkServiceClient(conn),
	}, nil
}

func (c *client) close() { _ = c.conn.Close() }

// transportCredentials is plaintext unless a TLS flag is set; --cert and
// --key together make it mutual TLS.
func transportCredentials(o *options) (credentials.TransportCredentials, error) {
	if o.caCert == "" && o.cert == "" && o.key == "" {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.caCert != "" {
		pem, err := os.ReadFile(o.caCert)
		if err != nil {
			return nil, fmt.Errorf("read --cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificates found", o.caCert)
		}
		cfg.RootCAs = pool
	}
	if (o.cert == "") != (o.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if o.cert != "" {
		pair, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(cfg), nil
}
