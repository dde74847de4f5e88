package soak

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
	"github.com/allotnet/allot/internal/netnstest"
)

var (
	durationFlag = flag.Duration("soak.duration", 90*time.Second, "how long TestSoak drives the cluster and injects faults")
	binDirFlag   = flag.String("soak.bin-dir", "", "use the binaries in this directory instead of building them")
	logsFlag     = flag.String("soak.logs", "", "copy the broker's and agents' logs into this directory")
)

const testStem = "allot-st-"

// TestSoak runs the cluster for -soak.duration with the driver and every
// kind of fault, and fails on any violated invariant, on a fault kind not
// injected, or on anything of the run left in the kernel.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end soak: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the cluster runs in network namespaces")
	}
	bins := testBinaries(t)
	_, file, _, _ := runtime.Caller(0)
	ctx, cancel := context.WithTimeout(context.Background(), *durationFlag+10*time.Minute)
	defer cancel()
	var logBuf bytes.Buffer
	cfg := Config{
		Logger:   slog.New(slog.NewTextHandler(&logBuf, nil)),
		Duration: *durationFlag,
		// Longer, if a loaded machine slowed the faults' recoveries,
		// until every kind was injected (checked below).
		EveryFault: true,
		Seed:       time.Now().UnixNano(),
		// Every kind of fault must fit in the run even on a loaded
		// machine (make test runs packages side by side); a node is
		// terminated and replaced beside them.
		FaultEvery: time.Second, FaultWindow: 2 * time.Second, PartitionWindow: 7 * time.Second,
		NodeEvery: 20 * time.Second, GCEvery: 5 * time.Second,
		Cluster: cluster.Config{
			Binaries: bins, Stem: testStem, LogDir: *logsFlag, Brokers: 3,
			Conflist: filepath.Join(filepath.Dir(file), "..", "cni", "10-allot.conflist"),
		},
	}
	var out bytes.Buffer
	res, err := Run(ctx, cfg, &out)
	if res != nil {
		res.WriteText(&out)
		_ = res.WriteJSON(&out)
	}
	t.Log(out.String())
	if *logsFlag != "" {
		_ = os.WriteFile(filepath.Join(*logsFlag, "soak.log"), logBuf.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatalf("soak run: %v", err)
	}
	if n := res.TotalViolations(); n > 0 {
		t.Errorf("%d invariant violations: %v", n, res.Violations)
	}
	for _, k := range FaultKinds {
		if res.Faults[k] == 0 {
			t.Errorf("no %s fault injected in %v (faults: %v)", k, cfg.Duration, res.Faults)
		}
	}
	for _, v := range []string{"ADD", "DEL", "CHECK", "replace", "GC"} {
		if res.Ops[v] == 0 {
			t.Errorf("no %s ran (ops: %v)", v, res.Ops)
		}
	}
	if left, err := netnstest.WithPrefix(testStem); err != nil || len(left) > 0 {
		t.Errorf("namespaces left by the soak: %v %v", left, err)
	}
}

// testBinaries builds the programs from this tree into a temporary
// directory (the build cache keeps it quick), or uses -soak.bin-dir.
func testBinaries(t *testing.T) cluster.Binaries {
	t.Helper()
	if *binDirFlag != "" {
		b, err := cluster.LocateBinaries(*binDirFlag)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, file, _, _ := runtime.Caller(0)
	mod, err := cluster.ModuleDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := cluster.BuildBinaries(ctx, mod, t.TempDir())
	if err != nil {
		t.Fatal(fmt.Errorf("build binaries: %w", err))
	}
	return b
}
