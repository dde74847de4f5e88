package cluster

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/internal/netnstest"
)

// testStem names every run of these tests; crashed runs of it are swept
// at each start, and none may be left at the end.
const testStem = "allot-ct-"

var (
	binDirFlag = flag.String("cluster.bin-dir", "", "use the binaries in this directory instead of building them")
	verbose    = flag.Bool("cluster.v", false, "log the harness and the simulation")
	logDir     = flag.String("cluster.logs", "", "copy every run's broker and agent logs into this directory, one subdirectory per test")
	testBins   Binaries
	buildErr   error

	// started holds the namespace prefix of every cluster this process
	// started. The check at exit looks only at these, so another run of the
	// tests on the same machine (with its own random prefix) is not taken
	// for a leak of this one.
	startedMu sync.Mutex
	started   []string
)

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Geteuid() != 0 || testing.Short() {
		os.Exit(m.Run()) // every cluster test skips; nothing to build
	}
	var cleanup func()
	testBins, cleanup, buildErr = binariesForTests()
	code := m.Run()
	cleanup()
	for _, prefix := range startedPrefixes() {
		if left, err := netnstest.WithPrefix(prefix); err != nil || len(left) > 0 {
			fmt.Fprintf(os.Stderr, "namespaces left by the tests: %v %v\n", left, err)
			code = 1
		}
	}
	os.Exit(code)
}

func startedPrefixes() []string {
	startedMu.Lock()
	defer startedMu.Unlock()
	return append([]string(nil), started...)
}

// binariesForTests builds the binaries from this tree into a temporary
// directory (the build cache keeps it quick), or uses -cluster.bin-dir.
func binariesForTests() (Binaries, func(), error) {
	noop := func() {}
	if *binDirFlag != "" {
		b, err := LocateBinaries(*binDirFlag)
		return b, noop, err
	}
	_, file, _, _ := runtime.Caller(0)
	mod, err := ModuleDir(filepath.Dir(file))
	if err != nil {
		return Binaries{}, noop, err
	}
	dir, err := os.MkdirTemp("", "allot-ctbin-")
	if err != nil {
		return Binaries{}, noop, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := BuildBinaries(ctx, mod, dir)
	return b, func() { _ = os.RemoveAll(dir) }, err
}

func requireCluster(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end cluster test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the cluster runs in network namespaces")
	}
	if buildErr != nil {
		t.Fatalf("binaries: %v", buildErr)
	}
}

func conflistPath(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	mod, err := ModuleDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(mod, "deploy", "cni", "10-allot.conflist")
}

// testConfig is a small, fast cluster.
func testConfig(t *testing.T, nodes int) Config {
	cfg := Config{
		Nodes: nodes, TimeScale: 20, Binaries: testBins, Conflist: conflistPath(t), Stem: testStem,
		ReadyTimeout: 90 * time.Second,
	}
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if *logDir != "" {
		cfg.LogDir = filepath.Join(*logDir, t.Name())
	}
	return cfg
}

// startCluster starts a cluster that is closed, and checked to leave
// nothing behind, when the test ends. On failure the processes' log tails
// are printed.
func startCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	requireCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	startedMu.Lock()
	started = append(started, c.Prefix)
	startedMu.Unlock()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker log (no debug lines):\n%s", c.Broker.LogTail(40))
			for _, n := range c.Nodes {
				t.Logf("%s agent log (no debug lines):\n%s", n.Name, n.Agent.LogTail(40))
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("close cluster: %v", err)
		}
		if left, _ := netnstest.WithPrefix(c.Prefix); len(left) > 0 {
			t.Errorf("namespaces left after close: %v", left)
		}
	})
	return c
}

// addAll creates perNode pods on every live node and fails unless every
// one got an address.
func addAll(t *testing.T, c *Cluster, perNode, parallel int, name string) []*Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.AddPods(ctx, perNode, parallel, name)
	if err != nil {
		t.Fatal(err)
	}
	return podsOf(t, res)
}

func podsOf(t *testing.T, res []AddResult) []*Pod {
	t.Helper()
	var pods []*Pod
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("pod %s: %v", r.Pod.Name, r.Err)
			continue
		}
		pods = append(pods, r.Pod)
	}
	if t.Failed() {
		t.FailNow()
	}
	return pods
}

// requireOwned fails unless every pod's address is unique and EC2 has it
// on an ENI attached to the pod's node.
func requireOwned(t *testing.T, c *Cluster, pods []*Pod) {
	t.Helper()
	seen := map[string]string{}
	for _, p := range pods {
		if q, dup := seen[p.Addr.String()]; dup {
			t.Errorf("%s and %s share %s", p.Name, q, p.Addr)
		}
		seen[p.Addr.String()] = p.Name
		inst, eni, ok := c.EC2Owner(p.Addr)
		if !ok || inst != p.Node.InstanceID {
			t.Errorf("%s: EC2 has %s on ENI %q of %q, want an ENI of %s", p.Name, p.Addr, eni, inst, p.Node.InstanceID)
		}
	}
}

// requireConnected fails unless every pod reaches a pod on another node
// and the outside host through its node's SNAT.
func requireConnected(t *testing.T, c *Cluster, pods []*Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pairs := CrossNodePairs(pods)
	if len(pairs) != len(pods) {
		t.Fatalf("%d cross-node pairs for %d pods", len(pairs), len(pods))
	}
	if r := c.CheckPairs(ctx, pairs); !r.OK() {
		t.Errorf("pod to pod: %d/%d failed: %v", len(r.Failed), r.Tried, r.Failed)
	}
	if r := c.CheckSNAT(ctx, pods); !r.OK() {
		t.Errorf("SNAT: %d/%d failed: %v", len(r.Failed), r.Tried, r.Failed)
	}
}

// deleteAllAndWaitIdle deletes the pods through CNI DEL and waits until
// nothing is left beyond the warm targets, anywhere.
func deleteAllAndWaitIdle(t *testing.T, c *Cluster, pods []*Pod) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if errs := c.DeletePods(ctx, pods); len(errs) > 0 {
		t.Fatalf("DEL: %v", errs)
	}
	if f, took := c.WaitIdle(ctx); len(f) > 0 {
		t.Fatalf("not idle after %v:\n  %s", took.Round(time.Millisecond), strings.Join(f, "\n  "))
	}
}

// eventually polls f until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
