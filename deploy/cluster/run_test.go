package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/awssim/dataplane"
	"github.com/allotnet/allot/internal/netnstest"
)

// TestSweepRemovesOnlyCrashedRuns leaves a "crashed" run behind — its data
// plane namespaces, a pod namespace, a child process recorded in its pid
// directory and its run directory, with its lock no longer held — next to
// a live run, and sweeps the stem: everything of the crashed run goes, the
// process is ended, and the live run is untouched.
func TestSweepRemovesOnlyCrashedRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	const stem = "allot-ctsweep-"
	crashed, err := newRun(stem, nil)
	if err != nil {
		t.Fatal(err)
	}
	live, err := newRun(stem, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.release() })

	var planes []*dataplane.Plane
	for _, r := range []*run{crashed, live} {
		p, err := dataplane.New(dataplane.Config{Prefix: r.prefix})
		if err != nil {
			t.Fatal(err)
		}
		planes = append(planes, p)
		ns, err := netnstest.Create(r.prefix + podInfix + "1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ns.Delete() })
	}
	t.Cleanup(func() {
		for _, p := range planes {
			_ = p.Close()
		}
		_ = dataplane.Cleanup(live.prefix)
		_ = dataplane.Cleanup(crashed.prefix)
	})
	// A child of the crashed run: its command line names the run
	// directory, as the broker's and agents' do.
	child := newProcess("child", "/usr/bin/tail", []string{"-f", filepath.Join(crashed.dir, "lock")},
		filepath.Join(crashed.dir, "child.log"), crashed.pidDir())
	if err := child.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.stop(0) })
	crashed.lock.Close() // the crash: nobody holds its lock any more

	swept, err := SweepStale(stem, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(swept, []string{crashed.prefix}) {
		t.Errorf("swept %v, want only %s", swept, crashed.prefix)
	}
	if left, _ := netnstest.WithPrefix(crashed.prefix); len(left) > 0 {
		t.Errorf("crashed run's namespaces left: %v", left)
	}
	if _, err := os.Stat(crashed.dir); !os.IsNotExist(err) {
		t.Errorf("crashed run's directory: %v", err)
	}
	if !waitExited(child) {
		t.Errorf("the crashed run's child process still runs")
	}
	left, _ := netnstest.WithPrefix(live.prefix)
	if want := []string{live.prefix + "-out", live.prefix + podInfix + "1", live.prefix + "-vpc"}; !slices.Equal(left, want) {
		t.Errorf("live run's namespaces %v, want %v", left, want)
	}
	if _, err := os.Stat(filepath.Join(live.dir, "lock")); err != nil {
		t.Errorf("live run's directory: %v", err)
	}
}

func waitExited(p *process) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}
