package soak

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/deploy/cluster"
)

// testSoak is a run's state over n nodes of a cluster nothing runs on,
// each with a driver that runs nothing: enough for the fault schedule's
// choice of nodes, which reads only the cluster's node list and the
// drivers' marks, and for its bookkeeping.
func testSoak(n int, seed int64, log *slog.Logger) *soak {
	c := &cluster.Cluster{}
	for i := range n {
		c.Nodes = append(c.Nodes, &cluster.Node{Index: i, Name: fmt.Sprintf("node-%d", i), InstanceID: fmt.Sprintf("i-%d", i)})
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := newSoak(c, Config{Seed: seed, Logger: log})
	for _, n := range c.Nodes {
		s.drivers[n] = &nodeDriver{cancel: func() {}, cancelOps: func() {}}
	}
	return s
}

// A termination never picks the node of a fault whose recovery is still
// being judged (the first ADD there after the fault was lifted): a
// 28-minute soak counted a partition as unrecovered because the
// termination picked its node after the partition healed but before an
// ADD had shown the recovery, and a terminated node adds no pod again.
func TestTerminationLeavesTheJudgedNode(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		s := testSoak(2, seed, nil)
		f := s.faults
		f.agents.Lock() // as inject picks a partition's node
		cut := f.pickJudged()
		f.agents.Unlock()
		if cut == nil {
			t.Fatalf("seed %d: the fault picked no node of two", seed)
		}
		victim, err := f.victim(context.Background())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if victim == cut {
			t.Fatalf("seed %d: the termination picked %s, whose fault's recovery was still to be judged", seed, cut.Name)
		}
		if !s.retired(victim) || s.retired(cut) {
			t.Fatalf("seed %d: retired %s %v, %s %v; want the victim alone", seed, victim.Name, s.retired(victim), cut.Name, s.retired(cut))
		}
		// The fault's node, no longer judged, is the next fault's to pick
		// or the next termination's.
		f.unjudge(cut)
		if n := f.pickNode(f.rng, nil); n != cut {
			t.Fatalf("seed %d: after the judgement the pick is %s, want %s (the only node left)", seed, nameOf(n), cut.Name)
		}
	}
}

// When the fault's node is the only one left, the termination waits until
// its recovery was recorded, and then takes it.
func TestTerminationWaitsForTheJudgement(t *testing.T) {
	waiting := make(chan struct{})
	log := &signalWriter{on: "termination waits", signal: waiting}
	s := testSoak(1, 20261128, slog.New(slog.NewTextHandler(log, nil)))
	f := s.faults
	f.agents.Lock()
	cut := f.pickJudged()
	f.agents.Unlock()
	lifted := time.Now() // the partition healed

	type picked struct {
		n    *cluster.Node
		recs []Recovery
		err  error
	}
	done := make(chan picked, 1)
	go func() {
		n, err := f.victim(context.Background())
		done <- picked{n, s.result().Recoveries, err}
	}()
	select {
	case p := <-done:
		t.Fatalf("the termination took %s (%v) while the fault's recovery on %s was still to be judged", nameOf(p.n), p.err, cut.Name)
	case <-waiting:
	case <-time.After(30 * time.Second):
		t.Fatal("the termination neither waited nor picked a node")
	}

	// The node's first ADD after the heal shows the recovery.
	f.addSucceeded(cut, lifted.Add(130*time.Millisecond))
	if !f.judge(context.Background(), FaultPartition, cut.Name+" cut off", lifted, lifted, cut) {
		t.Fatal("the judgement ended without a record")
	}
	var p picked
	select {
	case p = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the termination still waits after the judgement")
	}
	if p.err != nil || p.n != cut {
		t.Fatalf("the termination took %s (%v), want %s", nameOf(p.n), p.err, cut.Name)
	}
	if len(p.recs) != 1 || p.recs[0].Kind != FaultPartition || !p.recs[0].Recovered || p.recs[0].Seconds != 0.13 {
		t.Fatalf("recoveries when the termination took the node: %+v, want the partition's, recovered in 0.13 s", p.recs)
	}
	if !s.retired(cut) {
		t.Fatalf("%s not retired by its termination", cut.Name)
	}
}

// A fault whose node does not recover is still counted as unrecovered
// (its judgement is not cut short), and no termination takes the node
// meanwhile.
func TestUnrecoveredFaultStaysUnrecovered(t *testing.T) {
	s := testSoak(1, 3, nil)
	f := s.faults
	f.agents.Lock()
	cut := f.pickJudged()
	f.agents.Unlock()
	// An ADD before the fault was lifted shows nothing.
	lifted := time.Now()
	f.addSucceeded(cut, lifted.Add(-time.Second))
	vctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := f.victim(vctx); done <- err }()
	// The recovery wait runs out (recoverBound after lifted: here lifted
	// is long past).
	if !f.judge(context.Background(), FaultIMDSOutage, cut.Name+" IMDS down", lifted.Add(-recoverBound), lifted, cut) {
		t.Fatal("the judgement ended without a record")
	}
	recs := s.result().Recoveries
	if len(recs) != 1 || recs[0].Recovered {
		t.Fatalf("recoveries: %+v, want one unrecovered", recs)
	}
	if err := <-done; err != nil {
		t.Fatalf("the termination after the judgement: %v", err)
	}
}

func nameOf(n *cluster.Node) string {
	if n == nil {
		return "no node"
	}
	return n.Name
}

// signalWriter closes signal the first time a write contains on.
type signalWriter struct {
	on     string
	signal chan struct{}
	once   sync.Once
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (w *signalWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	if strings.Contains(string(b), w.on) {
		w.once.Do(func() { close(w.signal) })
	}
	return len(b), nil
}
