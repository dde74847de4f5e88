package reconciler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/reconciler"
)

// slowEC2 is an EC2 whose ENI describes take a while, and which notes
// when each pass starts (its first describe of our ENIs) and when it has
// described the subnets (its last read).
type slowEC2 struct {
	reconciler.EC2
	mu           sync.Mutex
	starts, ends []time.Time
}

func (s *slowEC2) DescribeENIs(ctx context.Context, in ec2client.DescribeENIsInput) ([]ec2client.ENIInfo, error) {
	if len(in.IDs) == 0 {
		s.mu.Lock()
		s.starts = append(s.starts, time.Now())
		s.mu.Unlock()
	}
	time.Sleep(20 * time.Millisecond)
	return s.EC2.DescribeENIs(ctx, in)
}

func (s *slowEC2) DescribeSubnets(ctx context.Context, ids []string) ([]ec2client.SubnetInfo, error) {
	out, err := s.EC2.DescribeSubnets(ctx, ids)
	s.mu.Lock()
	s.ends = append(s.ends, time.Now())
	s.mu.Unlock()
	return out, err
}

// TestLongPassesSpreadOut: when a pass takes longer than a tenth of the
// interval (a large cluster, a slow EC2), the next starts no sooner than
// about ten times the pass's own time later, not at the next tick.
func TestLongPassesSpreadOut(t *testing.T) {
	e := newEnv(t, 2)
	slow := &slowEC2{EC2: e.ec2}
	rec := reconciler.New(reconciler.Config{Cluster: cluster, Store: e.st, EC2: slow, Interval: time.Millisecond, Grace: grace})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rec.Run(ctx) }()
	for {
		time.Sleep(10 * time.Millisecond)
		slow.mu.Lock()
		n := len(slow.starts)
		slow.mu.Unlock()
		if n >= 3 {
			break
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	for i := 0; i+1 < len(slow.starts) && i < len(slow.ends); i++ {
		took, gap := slow.ends[i].Sub(slow.starts[i]), slow.starts[i+1].Sub(slow.starts[i])
		if gap < 5*took {
			t.Errorf("pass %d read EC2 for %v; the next started %v after it began, want at least %v", i, took, gap, 5*took)
		}
	}
}
