package brokerd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/broker/etcdembed"
)

// openEtcd returns the caller's client, connects to the external etcd, or
// starts the embedded one. The returned func closes what was opened here:
// the client, then the embedded server.
// token is the embedded cluster's bootstrap token ("allot-<cluster>").
func openEtcd(ctx context.Context, cfg EtcdConfig, token string, dial []grpc.DialOption, log *slog.Logger) (*clientv3.Client, func(), error) {
	switch {
	case cfg.Client != nil:
		return cfg.Client, func() {}, nil
	case len(cfg.Endpoints) > 0:
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: cfg.Endpoints, TLS: cfg.TLS, DialTimeout: 10 * time.Second, DialOptions: dial,
			Logger: etcdembed.NewZapLogger(log),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
		}
		if err := reachable(ctx, cli, cfg.Endpoints); err != nil {
			_ = cli.Close()
			return nil, nil, err
		}
		log.Info("using external etcd", "endpoints", cfg.Endpoints, "tls", cfg.TLS != nil)
		return cli, func() { _ = cli.Close() }, nil
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	m := cfg.Member
	e, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir: cfg.DataDir, UnsafeNoFsync: cfg.UnsafeNoFsync, Logger: log.With("component", "etcd"),
		Name: m.Name, PeerURL: m.PeerURL, ClientURL: m.ClientURL, InitialCluster: m.InitialCluster,
		ClusterState: m.State, ClusterToken: token, PeerTLS: m.PeerTLS,
	})
	if err != nil {
		return nil, nil, err
	}
	cli, err := e.Client(dial...)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	log.Info("using embedded etcd", "dir", cfg.DataDir, "endpoints", e.Endpoints(), "member", m.Name,
		"member_id", e.MemberID(), "etcd_cluster_id", e.ClusterID(), "initial_cluster", m.InitialCluster, "peer_tls", m.PeerTLS != nil)
	return cli, func() {
		_ = cli.Close()
		e.Close()
	}, nil
}

// reachable reads from the external etcd once, so that a wrong endpoint or
// TLS setting stops the broker at start with the reason, instead of leaving
// it to retry quietly: the client dials lazily.
func reachable(ctx context.Context, cli *clientv3.Client, endpoints []string) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Get(rctx, "/allot/v1/", clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("etcd %v does not answer (check --etcd-endpoints, and for TLS --etcd-cacert, --etcd-cert, --etcd-key): %w", endpoints, err)
	}
	return nil
}
