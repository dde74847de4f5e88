package harness

import (
	"context"
	"crypto/tls"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/allotnet/allot/broker/auth"
	"github.com/allotnet/allot/broker/auth/devca"
	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// Cluster is the broker's cluster name (etcd prefix, ENI tag).
const Cluster = "e2e"

// Broker is the broker in-process: embedded etcd, the store, an elector
// that runs the engine, and the gRPC server on 127.0.0.1.
type Broker struct {
	Store *store.Store
	// Addr is the gRPC address agents dial.
	Addr string
	// CAFile is the CA that signed the broker's certificate: agents verify
	// the broker with it and attest (TLS and attestation are on, as in
	// production).
	CAFile string
}

// StartBroker starts the broker the way allot-broker assembles it
// (brokerd), against the cloud's EC2 endpoint through the real SDK, with
// its limiter and timers scaled like the simulation. The reconciler stays
// off: these tests count the engine's calls.
func StartBroker(t testing.TB, c *Cloud, log *slog.Logger) *Broker {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	simClock, err := clock.Scaled(c.TimeScale)
	if err != nil {
		t.Fatal(err)
	}
	sec := brokerSecurity(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	b, err := brokerd.New(ctx, brokerd.Config{
		Name: "broker-e2e", Cluster: Cluster, Listen: "127.0.0.1:0",
		Etcd:  brokerd.EtcdConfig{Client: etcdembedtest.Start(t)},
		EC2:   brokerd.EC2Config{Endpoint: c.Sim.EC2Endpoint(), BucketShare: 0.5},
		Clock: simClock,
		// Engine timers are in the simulation's time: a 50 ms real interval.
		Engine: executor.Config{
			Interval: time.Duration(float64(50*time.Millisecond) * c.TimeScale),
			// Releases of surplus addresses are not what these tests
			// are about; a long wait keeps the engine from proposing
			// them mid-test.
			ReleaseAfter:   time.Duration(float64(time.Hour) * c.TimeScale),
			ReleaseTimeout: time.Duration(float64(time.Hour) * c.TimeScale),
		},
		NoReconciler: true,
		ElectionTTL:  5 * time.Second,
		Coalesce:     5 * time.Millisecond,
		Logger:       log,
		GRPC:         brokerd.GRPCConfig{Options: sec.options},
		Auth:         sec.auth,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		b.Close()
	})
	return &Broker{Store: b.Store(), Addr: b.Addr(), CAFile: sec.caFile}
}

// Records is what the broker's etcd holds for the node's ENIs, by ENI ID.
func (b *Broker) Records(t testing.TB) map[string]ENIState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	enis, err := b.Store.ListNodeENIs(ctx, InstanceID)
	if err != nil {
		t.Fatalf("broker records: %v", err)
	}
	out := map[string]ENIState{}
	for _, e := range enis {
		out[e.ID] = ENIState{Status: e.Status, DeviceIndex: e.DeviceIndex,
			Addresses: sortedCopy(append(append([]string(nil), e.Addresses...), e.Prefixes...))}
	}
	return out
}

// security is the broker's TLS and attestation, with a CA made for the
// test and awssim's identity document certificate.
type security struct {
	options []grpc.ServerOption
	auth    *brokerd.AuthConfig
	caFile  string
}

func brokerSecurity(t testing.TB, c *Cloud) security {
	t.Helper()
	ca, err := devca.New("allot e2e CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Server("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := leaf.TLS()
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := ca.WriteCert(t.TempDir(), "ca")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := c.Sim.IdentityCertificatePEM()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := auth.ParseCertificates(pem)
	if err != nil {
		t.Fatal(err)
	}
	return security{
		options: []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
			MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair},
			ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven,
		}))},
		auth:   &brokerd.AuthConfig{IdentityCertificates: certs},
		caFile: caFile,
	}
}
