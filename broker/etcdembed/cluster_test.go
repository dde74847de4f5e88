package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/internal/freeport"
)

func freeURL(t *testing.T) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + a
}

// testCluster is three members' configurations on loopback.
func testCluster(t *testing.T, n int) []Config {
	t.Helper()
	base := t.TempDir()
	var ms []Member
	cfgs := make([]Config, n)
	for i := range cfgs {
		name := fmt.Sprintf("m%d", i)
		cfgs[i] = Config{
			Dir: filepath.Join(base, name), Name: name, ClientURL: freeURL(t), ClusterToken: "allot-test",
			UnsafeNoFsync: true, HeartbeatInterval: 20 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond,
		}
		ms = append(ms, Member{Name: name, PeerURL: freeURL(t)})
	}
	for i := range cfgs {
		cfgs[i].InitialCluster = FormatInitialCluster(ms)
	}
	return cfgs
}

// startAll starts the members together: none is ready before a quorum
// runs, so they cannot be started one after the other.
func startAll(t *testing.T, ctx context.Context, cfgs []Config) []*Server {
	t.Helper()
	srvs := make([]*Server, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for i, c := range cfgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			srvs[i], errs[i] = Start(ctx, c)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("member %d: %v", i, err)
		}
		t.Cleanup(srvs[i].Close)
	}
	return srvs
}

// TestClusterOfThree shows the members form one raft cluster: a write
// through one member is read through another, the cluster survives the loss
// of one member, refuses writes without a quorum, and takes them again when
// a member comes back with its data.
func TestClusterOfThree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfgs := testCluster(t, 3)
	srvs := startAll(t, ctx, cfgs)

	ids := map[string]bool{}
	for _, s := range srvs {
		ids[s.ClusterID()] = true
	}
	if len(ids) != 1 {
		t.Fatalf("members report cluster IDs %v, want one", ids)
	}
	c0, err := srvs[0].Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	c2, err := srvs[2].Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c0.Put(ctx, "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	if got, err := c2.Get(ctx, "/k"); err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v1" {
		t.Fatalf("read through another member: %v, %v", got, err)
	}

	// One member down: two of three are a quorum.
	srvs[1].Close()
	if _, err := c2.Put(ctx, "/k", "v2"); err != nil {
		t.Fatalf("write with one member down: %v", err)
	}

	// Two down: no quorum, no write.
	srvs[0].Close()
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = c2.Put(wctx, "/k", "v3")
	wcancel()
	if err == nil {
		t.Fatal("a write succeeded on one member of three")
	}

	// Member 1 comes back on its data: quorum again, nothing lost.
	back, err := Start(ctx, cfgs[1])
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if back.ClusterID() != srvs[2].ClusterID() {
		t.Fatalf("restarted member is in cluster %s, want %s", back.ClusterID(), srvs[2].ClusterID())
	}
	c1, err := back.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if _, err := c1.Put(ctx, "/k2", "after"); err != nil {
		t.Fatalf("write after quorum came back: %v", err)
	}
	got, err := c2.Get(ctx, "/k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v2" {
		t.Fatalf("after recovery /k = %v, %v; want v2 (the refused v3 never written)", got, err)
	}
}

// TestMemberAloneWaitsForQuorum: a member of a three-member cluster started
// alone is not ready; Start waits for ctx instead of failing early.
func TestMemberAloneWaitsForQuorum(t *testing.T) {
	cfgs := testCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := Start(ctx, cfgs[0])
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start alone: %v, want the context's deadline", err)
	}
}

func TestClusterConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"not a member", Config{Name: "x", InitialCluster: "a=http://127.0.0.1:1,b=http://127.0.0.1:2"}, `member "x" is not in the initial cluster (members: a, b)`},
		{"peer url differs", Config{Name: "a", PeerURL: "http://127.0.0.1:9", InitialCluster: "a=http://127.0.0.1:1"}, "differs from member"},
		{"bad state", Config{Name: "a", ClusterState: "old"}, `cluster state "old"`},
		{"existing without members", Config{Name: "a", ClusterState: StateExisting}, "needs the initial cluster"},
		{"duplicate", Config{Name: "a", InitialCluster: "a=http://h:1,a=http://h:2"}, "appears twice"},
		{"no equals", Config{Name: "a", InitialCluster: "a"}, "want name=peer-url"},
		{"no port", Config{Name: "a", InitialCluster: "a=http://h"}, "want http://host:port"},
		{"https peer", Config{Name: "a", InitialCluster: "a=https://127.0.0.1:1"}, "without peer TLS"},
		{"http peer with TLS", Config{Name: "a", InitialCluster: "a=http://127.0.0.1:1", PeerTLS: &PeerTLS{"c", "k", "ca"}}, "with peer TLS"},
		{"TLS without CA", Config{Name: "a", PeerTLS: &PeerTLS{CertFile: "c", KeyFile: "k"}}, "peers' CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Dir = dir
			_, err := Start(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestListenURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:2380":                         "http://127.0.0.1:2380",
		"http://localhost:2380":                         "http://localhost:2380",
		"http://[::1]:2380":                             "http://[::1]:2380",
		"http://broker-0.allot-broker.kube-system:2380": "http://0.0.0.0:2380",
	} {
		u, err := parseURL(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := listenURL(u).String(); got != want {
			t.Errorf("listenURL(%s) = %s, want %s", in, got, want)
		}
	}
}
