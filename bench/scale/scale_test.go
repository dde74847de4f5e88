package scale

import (
	"bytes"
	"strings"
	"testing"

	"github.com/allotnet/allot/bench/burst"
)

func TestFromResultTargets(t *testing.T) {
	r := burst.Result{
		Nodes: 10, Pods: 300, Placed: 300, Complete: true, Status: burst.StatusOK,
		Rounds: 40, RoundP99: 80, BrokerPeakRSS: 600 << 20, Ratio: 1.05, LowerBoundSim: 10,
		Idle:               &burst.IdleFigures{WritesPerSec: 120},
		EtcdWritesByMethod: map[string]int64{"PutNodeStatus": 3, "ClearNodeStatus": 2},
	}
	f := FromResult(r, DefaultTargets, "1 1 1")
	want := map[string]bool{"round_p99": true, "broker_rss": false, "idle_writes": false, "burst_ratio": true}
	for k, v := range want {
		if f.Met[k] != v {
			t.Errorf("%s met = %v, want %v", k, f.Met[k], v)
		}
	}
	if f.StatusWrites != 5 {
		t.Errorf("status writes %d, want 5", f.StatusWrites)
	}
	r.RefusedCalls = 30255
	f = FromResult(r, DefaultTargets, "1 1 1")
	f.MaxAgentCalls = 256
	var tb bytes.Buffer
	f.WriteTable(&tb)
	for _, line := range []string{"agent calls refused as busy (burst)", "30255", "bound on agent calls at once", "256"} {
		if !strings.Contains(tb.String(), line) {
			t.Errorf("table lacks %q:\n%s", line, tb.String())
		}
	}
	// A round beyond the histogram's last bound, no idle window, an
	// incomplete burst: all missed.
	r.RoundP99, r.Idle, r.Complete = -1, nil, false
	f = FromResult(r, DefaultTargets, "")
	for _, k := range []string{"round_p99", "idle_writes", "burst_ratio"} {
		if f.Met[k] {
			t.Errorf("%s met, want missed", k)
		}
	}
	// A failed run meets nothing, though its zeros are under every target.
	f = FromResult(burst.Result{Status: burst.StatusFailed, Idle: &burst.IdleFigures{}}, DefaultTargets, "")
	for k, met := range f.Met {
		if met {
			t.Errorf("failed run: %s met", k)
		}
	}
	var b bytes.Buffer
	f.WriteTable(&b)
	if !strings.Contains(b.String(), "MISSED") {
		t.Errorf("table says nothing missed:\n%s", b.String())
	}
}

// TestEtcdApart: the figures say where etcd ran, and with etcd apart the
// table gives its RSS beside the broker's and the broker's memory by kind.
func TestEtcdApart(t *testing.T) {
	r := burst.Result{Nodes: 10, Pods: 300, Placed: 300, Status: burst.StatusOK, BrokerPeakRSS: 300 << 20,
		BrokerMem: &burst.MemPeaks{HeapLive: 100 << 20, HeapGoal: 200 << 20, Stacks: 30 << 20, Goroutines: 4000, Mapped: 250 << 20,
			GCCPU: 1.5, CPU: 10, GCCycles: 42}}
	f := FromResult(r, DefaultTargets, "")
	if f.Etcd != EtcdEmbedded || f.EtcdRSSMiB != 0 {
		t.Errorf("no etcd measured apart: etcd %q, %g MiB; want embedded", f.Etcd, f.EtcdRSSMiB)
	}
	var b bytes.Buffer
	f.WriteTable(&b)
	for _, want := range []string{"embedded in the broker", "broker live heap, peak (MiB) 100.0", "broker goroutines, peak 4000",
		"broker GC share of Go CPU (est.) 15.0% (2/10 s)", "broker collections 42"} {
		if !hasLine(b.String(), want) {
			t.Errorf("embedded: table lacks %q:\n%s", want, b.String())
		}
	}
	r.EtcdPeakRSS = 150 << 20
	f = FromResult(r, DefaultTargets, "")
	if f.Etcd != EtcdApart || f.EtcdRSSMiB != 150 {
		t.Errorf("etcd apart: %q, %g MiB; want apart, 150", f.Etcd, f.EtcdRSSMiB)
	}
	b.Reset()
	f.WriteTable(&b)
	for _, want := range []string{"in a process of its own", "etcd peak RSS (MiB, own process) 150.0"} {
		if !hasLine(b.String(), want) {
			t.Errorf("apart: table lacks %q:\n%s", want, b.String())
		}
	}
}

// hasLine reports whether a line of table holds want, spaces aside.
func hasLine(table, want string) bool {
	for _, l := range strings.Split(table, "\n") {
		if strings.Contains(strings.Join(strings.Fields(l), " "), want) {
			return true
		}
	}
	return false
}

// TestWarmAgain: a scale run waits for the pools past the top-ups' floor,
// and the table says when they were all warm again and how many were not.
func TestWarmAgain(t *testing.T) {
	if !BurstConfig(100, 30, 5, 0).WarmUntilFloor {
		t.Fatal("the scale run stops waiting for warm pools two minutes after the last pod")
	}
	r := burst.Result{Status: burst.StatusOK, WarmSim: 512.5, WarmFloorSim: 499.6, WarmShortAfter: 3}
	f := FromResult(r, DefaultTargets, "")
	if f.WarmSim != 512.5 || f.WarmFloorSim != 499.6 || f.NotWarm != 3 {
		t.Fatalf("figures %+v", f)
	}
	var b bytes.Buffer
	f.WriteTable(&b)
	for _, want := range []string{"all pools warm again (sim s)", "512.5", "499.6"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
