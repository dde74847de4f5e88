// Package etcdembed runs an etcd server inside the broker process: the
// one-machine default when no external etcd cluster is configured, and the
// real etcd every broker test runs against.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config says where the embedded etcd keeps its data and listens.
type Config struct {
	// Dir is the data directory (created if missing). Required.
	Dir string
	// Name is the member name; "allot" if empty.
	Name string
	// ClientURL and PeerURL are http URLs to listen on; empty means
	// 127.0.0.1 on a free port.
	ClientURL, PeerURL string
	// Logger receives etcd's warnings and errors; nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds how long Start waits for the server to be ready;
	// 30s if zero.
	StartTimeout time.Duration
	// HeartbeatInterval and ElectionTimeout tune raft; etcd's defaults
	// (100ms, 1s) if zero. Tests shorten them so startup is quick.
	HeartbeatInterval, ElectionTimeout time.Duration
	// UnsafeNoFsync skips fsync. Only for tests: a crash loses data.
	UnsafeNoFsync bool
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
	if cfg.Dir == "" {
		return nil, errors.New("start embedded etcd: data directory is required")
	}
	if cfg.Name == "" {
		cfg.Name = "allot"
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	var err error
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

func start(ctx context.Context, cfg Config) (*Server, error) {
	clientURL, err := urlOrFree(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: client url: %w", err)
	}
	peerURL, err := urlOrFree(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: peer url: %w", err)
	}
	zl := newZapLogger(cfg.Logger)

	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*clientURL}
	ec.AdvertiseClientUrls = []url.URL{*clientURL}
	ec.ListenPeerUrls = []url.URL{*peerURL}
	ec.AdvertisePeerUrls = []url.URL{*peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(cfg.Name)
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zl)
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	if cfg.HeartbeatInterval > 0 {
		ec.TickMs = uint(cfg.HeartbeatInterval.Milliseconds())
	}
	if cfg.ElectionTimeout > 0 {
		ec.ElectionMs = uint(cfg.ElectionTimeout.Milliseconds())
	}
	// Keep history bounded: the store only watches forward from "now".
	ec.AutoCompactionMode = embed.CompactorModePeriodic
	ec.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd in %s: %w", cfg.Dir, err)
	}
	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed while starting: %w", err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after %s", cfg.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("start embedded etcd: %w", ctx.Err())
	}
	return &Server{etcd: e, cfg: cfg, zl: zl, client: clientURL.String()}, nil
}

// urlOrFree parses s, or picks a free port on 127.0.0.1 when s is empty.
func urlOrFree(s string) (*url.URL, error) {
	if s != "" {
		u, err := url.Parse(s)
		if err != nil {
			return nil, err
		}
		if u.Scheme != "http" || u.Host == "" {
			return nil, fmt.Errorf("%q: want http://host:port", s)
		}
		return u, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return nil, err
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// Endpoints returns the client URLs to dial.
func (s *Server) Endpoints() []string { return []string{s.client} }

// Client returns a new client connected to this server; the caller closes it.
func (s *Server) Client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.Endpoints(),
		DialTimeout: 5 * time.Second,
		Logger:      s.zl,
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
