package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
	"github.com/allotnet/allot/internal/netnstest"
)

// TestSmallRun runs the whole benchmark small: two real agents with ten
// pods each, a short churn and a short pool run in both commit modes.
func TestSmallRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the benchmark creates network namespaces")
	}
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	_, file, _, _ := runtime.Caller(0)
	mod, err := cluster.ModuleDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins, err := cluster.BuildBinaries(ctx, mod, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const stem = "allot-tagents-"
	rep, err := Run(ctx, Config{
		Cluster:     cluster.Config{Nodes: 2, Binaries: bins, Conflist: filepath.Join(mod, "deploy/cni/10-allot.conflist"), Stem: stem},
		PodsPerNode: 10, Parallel: 4, Idle: time.Second, Churn: 2 * time.Second,
		Pool: PoolConfig{Duration: 300 * time.Millisecond, Workers: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Pods != 20 || rep.DistinctAddrs != 20 || rep.Failed != 0 {
		t.Errorf("burst: %d pods, %d distinct addresses, %d failed; want 20, 20, 0", rep.Pods, rep.DistinctAddrs, rep.Failed)
	}
	if len(rep.Agents) != 2 {
		t.Fatalf("%d agents reported, want 2", len(rep.Agents))
	}
	for _, a := range rep.Agents {
		if a.Pid <= 0 || a.IdleRSSMiB <= 0 || a.LoadedRSSMiB <= 0 || a.PeakRSSMiB < a.LoadedRSSMiB || a.LoadedFileMiB <= 0 {
			t.Errorf("%s: figures not read from /proc: %+v", a.Node, a)
		}
		if a.BurstCPUSeconds <= 0 {
			t.Errorf("%s: the burst cost no CPU time: %+v", a.Node, a)
		}
	}
	if c := rep.Churn; c == nil || c.Replacements == 0 || c.DistinctAtEnd != 10 {
		t.Errorf("churn: %+v; want replacements and 10 distinct addresses at the end", c)
	}
	if len(rep.Pool) != 2 || rep.Pool[0].Mode != "group-commit" || rep.Pool[1].Mode != "each-alone" {
		t.Fatalf("pool: %+v; want group-commit then each-alone", rep.Pool)
	}
	for _, p := range rep.Pool {
		if p.Changes == 0 || p.Writes == 0 {
			t.Errorf("pool %s: %d changes, %d writes", p.Mode, p.Changes, p.Writes)
		}
	}
	if alone := rep.Pool[1]; alone.ChangesPerWrite != 1 {
		t.Errorf("each-alone wrote %d times for %d changes; want one write per change", alone.Writes, alone.Changes)
	}
	var buf bytes.Buffer
	rep.WriteText(&buf)
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	var back Report
	if err := json.Unmarshal(lines[len(lines)-1], &back); err != nil {
		t.Fatalf("last line is not the JSON report: %v\n%s", err, lines[len(lines)-1])
	}
	if back.Pods != rep.Pods || len(back.Agents) != 2 {
		t.Errorf("JSON line says %d pods, %d agents", back.Pods, len(back.Agents))
	}
	if left, err := netnstest.WithPrefix(stem); err != nil || len(left) > 0 {
		t.Errorf("namespaces left: %v %v", left, err)
	}
}
