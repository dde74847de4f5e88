package instances

import (
	"context"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/store"
)

// blockingEC2 answers DescribeInstanceTypes once release is closed, after
// saying on entered that a describe began.
type blockingEC2 struct {
	EC2
	entered chan string
	release chan struct{}
}

func (b *blockingEC2) DescribeInstanceTypes(_ context.Context, types []string) (map[string]ec2client.InstanceTypeInfo, error) {
	b.entered <- types[0]
	<-b.release
	return map[string]ec2client.InstanceTypeInfo{types[0]: {MaxENIs: 4, IPv4PerENI: 15}}, nil
}

// StartEnsure runs one pass at a time apart from its caller: a second
// start while the first pass waits on EC2 starts nothing, the first
// pass's outcome reaches done, and a start after it ends runs again.
func TestStartEnsureOneAtATime(t *testing.T) {
	ec2 := &blockingEC2{entered: make(chan string, 2), release: make(chan struct{})}
	m := New(nil, ec2, time.Minute)
	// Records with their limits: only the type is described, nothing
	// is written.
	view := func(typ string) View {
		return View{Nodes: []store.Node{{InstanceID: "i-1", InstanceType: typ, MaxENIs: 4, IPv4PerENI: 15, Mode: "prefix"}},
			Subnets: map[string]store.Subnet{}, HasPrimary: func(string) bool { return true }}
	}
	ctx := context.Background()
	done := make(chan error, 2)
	report := func(_ bool, err error) { done <- err }
	if !m.StartEnsure(ctx, view("c5.xlarge"), time.Now(), report) {
		t.Fatal("the first pass did not start")
	}
	if got := <-ec2.entered; got != "c5.xlarge" {
		t.Fatalf("described %s, want c5.xlarge", got)
	}
	if m.StartEnsure(ctx, view("m5.large"), time.Now(), report) {
		t.Fatal("a second pass started while the first ran")
	}
	close(ec2.release)
	if err := <-done; err != nil {
		t.Fatalf("first pass: %v", err)
	}
	m.Wait()
	if l, ok := m.cached("c5.xlarge"); !ok || l.MaxENIs != 4 {
		t.Fatalf("c5.xlarge after the pass: %+v, %v", l, ok)
	}
	if !m.StartEnsure(ctx, view("m5.large"), time.Now(), report) {
		t.Fatal("no pass started after the first ended")
	}
	if got := <-ec2.entered; got != "m5.large" {
		t.Fatalf("described %s, want m5.large", got)
	}
	m.Wait()
	if err := <-done; err != nil {
		t.Fatalf("second pass: %v", err)
	}
}
