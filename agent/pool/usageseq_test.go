package pool

import "testing"

// TestUsageSeqReservedInBlocks: usage-report numbers cost one checkpoint
// write per UsageSeqBlock, not one each; every number handed out is at or
// below the mark already persisted, so a pool restored from any of those
// writes continues above it.
func TestUsageSeqReservedInBlocks(t *testing.T) {
	f := newPool(t, Config{})
	_, savesBefore := f.store.state()
	n := 2*UsageSeqBlock + 1
	var last uint64
	for range n {
		seq, err := f.p.NextUsageSeq()
		if err != nil {
			t.Fatal(err)
		}
		if seq != last+1 {
			t.Fatalf("usage seq %d after %d", seq, last)
		}
		last = seq
		persisted, _ := f.store.state()
		if persisted.UsageSeq < seq {
			t.Fatalf("usage seq %d handed out above the persisted mark %d", seq, persisted.UsageSeq)
		}
		q, err := New(Config{InstanceID: instance, Clock: f.clock}, persisted)
		if err != nil {
			t.Fatal(err)
		}
		if next, _ := q.NextUsageSeq(); next <= seq {
			t.Fatalf("a pool restored after seq %d hands out %d", seq, next)
		}
	}
	if _, saves := f.store.state(); saves-savesBefore != 3 {
		t.Fatalf("%d usage seqs took %d checkpoint writes, want 3", n, saves-savesBefore)
	}
}
