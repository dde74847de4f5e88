package brokerd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/etcdembed"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/leader"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/subnets"
)

// Config is everything a broker replica is told. allot-broker builds it from
// its flags; the end-to-end harness, the benchmark and tests build it in
// code. Zero fields take the defaults noted.
type Config struct {
	// Name is this replica's name in leader election and status. Required.
	Name string
	// Cluster is the etcd key prefix and the allot.dev/cluster tag on ENIs.
	// Required.
	Cluster string
	// Listen is the gRPC listen address; "127.0.0.1:0" picks a free port
	// (Broker.Addr says which). Default 127.0.0.1:7600.
	Listen string

	Etcd EtcdConfig
	EC2  EC2Config

	// Clock is the broker's time: the wall clock (the zero Clock), or for
	// a broker run against a simulated EC2 whose time runs faster, that
	// faster clock; the EC2 token buckets and every timer of the engine
	// and the reconciler run on it.
	Clock clock.Clock

	// Engine tunes the leader's engine (executor). Cluster, Store, EC2,
	// Logger and Clock are set by the broker; its timers are in Clock's
	// time.
	Engine executor.Config
	// PodSubnets selects the subnets the leader records from EC2 at start
	// and refreshes, so their budgets are listed before any node in them
	// registers. Empty: a subnet is recorded when a node in it registers.
	PodSubnets subnets.Selector
	// NoReconciler leaves the reconciler off on the leader; for tests that
	// want only the engine's EC2 calls.
	NoReconciler bool

	// ElectionTTL is the leader session lease: how long a dead leader
	// keeps the lead. Default leader.DefaultTTL.
	ElectionTTL time.Duration
	// NodeTTL is how long a node counts as alive after its last heartbeat.
	// Default 30s.
	NodeTTL time.Duration
	// Coalesce is how long the server's watch streams let a burst of
	// changes settle; default 50ms.
	Coalesce time.Duration
	// MaxAgentCalls bounds the agents' calls that read or write etcd that
	// the replica runs at once; beyond it a call is refused as busy and
	// the agent retries with backoff (server.Config.MaxAgentCalls).
	// Default server.DefaultMaxAgentCalls; negative: no total bound.
	MaxAgentCalls int
	// ShutdownTimeout bounds how long in-flight calls may run once Run's
	// context ends. Default 10s.
	ShutdownTimeout time.Duration

	// GRPC is what the gRPC server is given on top of the broker's own
	// middleware.
	GRPC GRPCConfig
	// Auth, when set, makes every call prove who it is from (broker/auth).
	// nil serves anyone: only allot-broker's explicitly insecure flag and
	// in-process tests leave it nil.
	Auth *AuthConfig

	// Logger; nil discards.
	Logger *slog.Logger
	// RecentLogs, if set, holds the latest log records for AdminService
	// GetLogs (logring.Ring, fed by Logger).
	RecentLogs server.RecentLogs
	// Meter receives the broker's metrics (broker/metrics, EC2 calls, etcd
	// latency; docs/metrics.md); nil records none.
	Meter metric.Meter
}

// EtcdConfig says which etcd the broker keeps its state in: an external
// cluster (Endpoints), a client the caller owns (Client), or an embedded
// single member in DataDir.
type EtcdConfig struct {
	// Endpoints of an external etcd cluster, with TLS (nil: plaintext).
	Endpoints []string
	TLS       *tls.Config
	// Client, if set, is used as it is and not closed by the broker.
	Client *clientv3.Client
	// DataDir holds the embedded etcd's data when neither Endpoints nor
	// Client is set.
	DataDir string
	// UnsafeNoFsync turns the embedded etcd's fsync off: faster, and a
	// crash loses data. For benchmarks.
	UnsafeNoFsync bool
	// Member makes the embedded etcd one member of a cluster formed by the
	// replicas; zero: a member alone.
	Member EtcdMember
}

// EtcdMember is the embedded etcd's place in a cluster of replicas
// (etcdembed.Config has the details of each field).
type EtcdMember struct {
	Name, PeerURL, ClientURL string
	// InitialCluster is "name=peer-url,..."; empty for a member alone.
	InitialCluster string
	// State is etcdembed.StateNew or StateExisting.
	State string
	// PeerTLS secures the traffic between members; nil: plain http.
	PeerTLS *etcdembed.PeerTLS
}

// EC2Config says how the broker reaches EC2.
type EC2Config struct {
	// Region; default us-east-1.
	Region string
	// Endpoint overrides EC2's (a simulator's URL).
	Endpoint string
	// Credentials sign requests; nil means static test credentials, which
	// only a simulator accepts.
	Credentials aws.CredentialsProvider
	// BucketShare is the fraction (0,1] of each EC2 token bucket this
	// broker may use. Default 0.5.
	BucketShare float64
}

// GRPCConfig is the seam for what other parts add to the gRPC server.
type GRPCConfig struct {
	// Options are added to the server's (e.g. TLS credentials).
	Options []grpc.ServerOption
	// Unary and Stream interceptors run inside the broker's own middleware
	// (logging, recovery, validation), before the handler: authentication
	// and authorisation go here.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
}

func (c *Config) defaults() error {
	switch {
	case c.Name == "":
		return errors.New("brokerd: replica name is required")
	case c.Cluster == "":
		return errors.New("brokerd: cluster name is required")
	case c.EC2.BucketShare < 0 || c.EC2.BucketShare > 1:
		return fmt.Errorf("brokerd: bucket share %g: want a fraction in (0, 1]", c.EC2.BucketShare)
	case len(c.Etcd.Endpoints) == 0 && c.Etcd.Client == nil && c.Etcd.DataDir == "":
		return errors.New("brokerd: etcd endpoints, a client or a data directory is required")
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7600"
	}
	if c.EC2.Region == "" {
		c.EC2.Region = "us-east-1"
	}
	if c.EC2.BucketShare == 0 {
		c.EC2.BucketShare = 0.5
	}
	if c.ElectionTTL <= 0 {
		c.ElectionTTL = leader.DefaultTTL
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}
