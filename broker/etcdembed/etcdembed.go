// Package etcdembed runs an etcd server inside the broker process: a member
// alone (the one-machine default when no external etcd cluster is
// configured, and the real etcd every broker test runs against), or one
// member of a raft cluster whose other members run in the other broker
// replicas, so three brokers are highly available without a separate etcd.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/internal/freeport"
)

// Config says where the embedded etcd keeps its data and listens, and which
// cluster it forms: alone (the default) or with the other brokers' members.
type Config struct {
	// Dir is the data directory (created if missing). Required.
	Dir string
	// Name is the member name; "allot" if empty.
	Name string
	// ClientURL and PeerURL are the http URLs this member advertises; it
	// binds to them too when their host is a loopback address, else to
	// every address on their port. An empty ClientURL means 127.0.0.1 on a free
	// port; an empty PeerURL means this member's URL in InitialCluster, or
	// 127.0.0.1 on a free port.
	ClientURL, PeerURL string
	// InitialCluster lists every member ("name=peer-url,...") when this
	// member bootstraps a cluster with others or joins one; empty means a
	// cluster of this member alone. etcd reads it only while Dir holds no
	// data: afterwards the membership is part of the data.
	InitialCluster string
	// ClusterState is StateNew (the default) or StateExisting.
	ClusterState string
	// ClusterToken tells apart clusters bootstrapped from the same member
	// list; "allot" if empty.
	ClusterToken string
	// Logger receives etcd's warnings and errors; nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds how long Start waits for the server to be ready;
	// if zero, 30s for a member alone and no bound (only ctx) for a member
	// of a cluster, which is ready only once a quorum of members runs.
	StartTimeout time.Duration
	// HeartbeatInterval and ElectionTimeout tune raft; etcd's defaults
	// (100ms, 1s) if zero. Tests shorten them so startup is quick.
	HeartbeatInterval, ElectionTimeout time.Duration
	// UnsafeNoFsync skips fsync. Only for tests: a crash loses data.
	UnsafeNoFsync bool
	// PeerTLS, when set, secures the raft traffic between members with
	// mutual TLS: every peer URL is then https. Nil: plain http, for a
	// member alone or peers on a network nobody else reaches.
	PeerTLS *PeerTLS
}

// PeerTLS is a member's peer certificate and the CA its peers' must chain
// to. A member accepts a peer connection only with a certificate that CA
// signed, and checks that the certificate of each peer it dials names the
// host of that peer's URL (an IP or DNS subject alternative name).
type PeerTLS struct {
	CertFile, KeyFile, CAFile string
}

// peerScheme is the scheme every peer URL must have.
func (cfg Config) peerScheme() string {
	if cfg.PeerTLS != nil {
		return "https"
	}
	return "http"
}

// Server is a running embedded etcd.
type Server struct {
	etcd   *embed.Etcd
	cfg    Config
	zl     *zap.Logger
	client string
	once   sync.Once
}

// portAttempts bounds retries when a free port picked for us is taken by
// someone else before etcd binds it.
const portAttempts = 5

// Start starts etcd and waits until it serves requests or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < portAttempts; attempt++ {
		var s *Server
		s, err = start(ctx, cfg)
		if err == nil {
			return s, nil
		}
		// Only a port we picked ourselves can be retried.
		if !errors.Is(err, syscall.EADDRINUSE) || (cfg.ClientURL != "" && cfg.PeerURL != "") {
			return nil, err
		}
	}
	return nil, err
}

// withDefaults fills in the defaults and checks the cluster settings, so a
// mistake is reported in allot's words before etcd sees it.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Dir == "" {
		return cfg, errors.New("start embedded etcd: data directory is required")
	}
	if cfg.Name == "" {
		cfg.Name = "allot"
	}
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "allot"
	}
	switch cfg.ClusterState {
	case "":
		cfg.ClusterState = StateNew
	case StateNew, StateExisting:
	default:
		return cfg, fmt.Errorf("start embedded etcd: cluster state %q: want %q or %q", cfg.ClusterState, StateNew, StateExisting)
	}
	if t := cfg.PeerTLS; t != nil && (t.CertFile == "" || t.KeyFile == "" || t.CAFile == "") {
		return cfg, errors.New("start embedded etcd: peer TLS needs a certificate, its key and the peers' CA")
	}
	if cfg.InitialCluster == "" {
		if cfg.ClusterState == StateExisting {
			return cfg, errors.New("start embedded etcd: joining an existing cluster needs the initial cluster")
		}
		return cfg, nil
	}
	ms, err := ParseInitialCluster(cfg.InitialCluster)
	if err != nil {
		return cfg, fmt.Errorf("start embedded etcd: %w", err)
	}
	for _, m := range ms {
		if !strings.HasPrefix(m.PeerURL, cfg.peerScheme()+"://") {
			return cfg, fmt.Errorf("start embedded etcd: member %q's peer URL %s: want %s:// %s", m.Name, m.PeerURL,
				cfg.peerScheme(), map[bool]string{true: "with peer TLS", false: "without peer TLS"}[cfg.PeerTLS != nil])
		}
	}
	own := PeerURLOf(ms, cfg.Name)
	switch {
	case own == "":
		return cfg, fmt.Errorf("start embedded etcd: member %q is not in the initial cluster (members: %s)",
			cfg.Name, strings.Join(Names(ms), ", "))
	case cfg.PeerURL == "":
		cfg.PeerURL = own
	case cfg.PeerURL != own:
		return cfg, fmt.Errorf("start embedded etcd: peer URL %s differs from member %q's %s in the initial cluster",
			cfg.PeerURL, cfg.Name, own)
	}
	if cfg.StartTimeout == 0 && len(ms) > 1 {
		cfg.StartTimeout = -1 // a quorum may take as long as the other pods do
	}
	return cfg, nil
}

func start(ctx context.Context, cfg Config) (*Server, error) {
	clientURL, err := urlOrFree(cfg.ClientURL, "http")
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: client url: %w", err)
	}
	peerURL, err := urlOrFree(cfg.PeerURL, cfg.peerScheme())
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: peer url: %w", err)
	}
	zl := NewZapLogger(cfg.Logger)
	ec := embedConfig(cfg, clientURL, peerURL, zl)
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
	}
	if err := waitReady(ctx, e, cfg); err != nil {
		// Close waits for the client listeners, which a member that never
		// became ready (no quorum) has not started; stopping the server
		// first ends them.
		e.Server.HardStop()
		e.Close()
		return nil, err
	}
	return &Server{etcd: e, cfg: cfg, zl: zl, client: clientURL.String()}, nil
}

// embedConfig is etcd's configuration for cfg with the URLs resolved.
func embedConfig(cfg Config, clientURL, peerURL *url.URL, zl *zap.Logger) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*listenURL(clientURL)}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*listenURL(peerURL)}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	}
	ec.ClusterState = cfg.ClusterState
	ec.InitialClusterToken = cfg.ClusterToken
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if t := cfg.PeerTLS; t != nil {
		ec.PeerTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
	}
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval.Milliseconds())
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout.Milliseconds())
	}
	// Keep history bounded: the store only watches forward from "now".
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"
	return ec
}

// waitReady waits until the member serves: for a member of a cluster, until
// a quorum runs and has a leader. A negative StartTimeout waits for ctx
// alone, saying every so often what it waits for.
func waitReady(ctx context.Context, e *embed.Etcd, cfg Config) error {
	var limit <-chan time.Time
	if cfg.StartTimeout > 0 {
		timer := time.NewTimer(cfg.StartTimeout)
		defer timer.Stop()
		limit = timer.C
	}
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	started := time.Now()
	for {
		select {
		case <-e.Server.ReadyNotify():
			return nil
		case err := <-e.Err():
			return fmt.Errorf("embedded etcd failed while starting: %w", err)
		case <-limit:
			return fmt.Errorf("embedded etcd not ready after %s", cfg.StartTimeout)
		case <-ctx.Done():
			return fmt.Errorf("start embedded etcd: %w", ctx.Err())
		case <-tick.C:
			if cfg.Logger != nil {
				cfg.Logger.Warn("embedded etcd waits for a quorum of its cluster's members",
					"member", cfg.Name, "initial_cluster", cfg.InitialCluster, "waited", time.Since(started).Round(time.Second))
			}
		}
	}
}

// urlOrFree parses s, which must have scheme, or picks a free port on
// 127.0.0.1 when s is empty.
func urlOrFree(s, scheme string) (*url.URL, error) {
	if s != "" {
		u, err := parseURL(s)
		if err != nil {
			return nil, err
		}
		if u.Scheme != scheme {
			if scheme == "https" {
				return nil, fmt.Errorf("%q: with peer TLS every peer URL is https", s)
			}
			return nil, fmt.Errorf("%q: want http here: the client URL stays on plain http on loopback, and peers speak https only with peer TLS", s)
		}
		return u, nil
	}
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	return &url.URL{Scheme: scheme, Host: addr}, nil
}

// ClusterID is the raft cluster's ID, as etcdctl prints it (hex).
func (s *Server) ClusterID() string { return s.etcd.Server.Cluster().ID().String() }

// MemberID is this member's ID (hex).
func (s *Server) MemberID() string { return s.etcd.Server.MemberID().String() }

// Endpoints returns the client URLs to dial.
func (s *Server) Endpoints() []string { return []string{s.client} }

// Client returns a new client connected to this server, dialed with opts
// besides the client's own; the caller closes it.
func (s *Server) Client(opts ...grpc.DialOption) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      s.zl,
		DialOptions: opts,
	})
	if err != nil {
		return nil, fmt.Errorf("connect to embedded etcd at %s: %w", strings.Join(s.Endpoints(), ","), err)
	}
	return cli, nil
}

// Err reports a fatal server error after start (nil channel value never sent
// on a clean Close).
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server; calling it again does nothing. Clients should be
// closed first.
func (s *Server) Close() { s.once.Do(s.etcd.Close) }
