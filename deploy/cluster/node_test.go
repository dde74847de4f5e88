package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
)

// TestNodeLeaving takes a node away in two steps. First its agent dies: the
// broker stops hearing from it but EC2 still runs the instance, so for
// well over the node TTL and several reconciler passes the broker must
// release nothing — its records and EC2's ENIs stay as they were (missing
// evidence is never evidence of absence). Then EC2 terminates the
// instance: only now may the broker release the node, and it must — its
// records and registration go, and no ENI of the node is left in EC2. The
// other nodes' pods stay connected throughout and the cluster ends idle.
func TestNodeLeaving(t *testing.T) {
	c := startCluster(t, testConfig(t, 3))
	pods := addAll(t, c, 3, 0, "leave")
	requireConnected(t, c, pods)
	gone, stay := c.Nodes[2], c.Nodes[:2]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.WaitSettled(ctx); err != nil {
		t.Fatal(err)
	}
	recsBefore, _, err := c.BrokerFootprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ec2Before := c.EC2Footprint()[gone.InstanceID]
	if len(recsBefore[gone.InstanceID].ENIs) == 0 || ec2Before.Addresses == 0 {
		t.Fatalf("%s holds nothing to release: records %+v, EC2 %+v", gone.Name, recsBefore[gone.InstanceID], ec2Before)
	}

	if err := gone.Agent.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the broker to count the node dead", func() error {
		nodes, err := c.BrokerNodes(ctx)
		if err != nil {
			return err
		}
		if s, ok := nodes[gone.InstanceID]; !ok || s.GetAlive() {
			return fmt.Errorf("node summary %v", s)
		}
		return nil
	})
	// Several reconciler passes (one per simulated minute) with the node
	// dead but its instance running: nothing of it may be released.
	time.Sleep(3 * time.Duration(float64(time.Minute)/c.cfg.TimeScale))
	recs, _, err := c.BrokerFootprint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !holds(recs[gone.InstanceID], recsBefore[gone.InstanceID]) {
		t.Fatalf("the broker released records of a dead node while EC2 still runs it:\nbefore %+v\nafter  %+v",
			recsBefore[gone.InstanceID], recs[gone.InstanceID])
	}
	if now := c.EC2Footprint()[gone.InstanceID]; !holds(now, ec2Before) {
		t.Fatalf("EC2 lost ENIs or addresses of a dead node whose instance runs:\nbefore %+v\nafter  %+v", ec2Before, now)
	}

	if err := c.TerminateInstance(gone); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, "the broker to release the terminated node", func() error {
		recs, _, err := c.BrokerFootprint(ctx)
		if err != nil {
			return err
		}
		if f := recs[gone.InstanceID]; len(f.ENIs) > 0 {
			return fmt.Errorf("still records %d ENIs", len(f.ENIs))
		}
		nodes, err := c.BrokerNodes(ctx)
		if err != nil {
			return err
		}
		if _, ok := nodes[gone.InstanceID]; ok {
			return errors.New("still registered")
		}
		for _, e := range c.OurENIs() {
			if e.Tags[ec2client.TagInstanceID] == gone.InstanceID {
				return fmt.Errorf("EC2 still has its ENI %s (%s)", e.ID, e.Status)
			}
		}
		return nil
	})

	var left []*Pod
	for _, p := range pods {
		if slices.Contains(stay, p.Node) {
			left = append(left, p)
		}
	}
	requireConnected(t, c, left)
	deleteAllAndWaitIdle(t, c, left)
}

// holds reports whether footprint a still holds every ENI and address of
// b: nothing of b was released.
func holds(a, b NodeFootprint) bool {
	for _, y := range b.ENIs {
		i := slices.IndexFunc(a.ENIs, func(x ENIView) bool { return x.ID == y.ID })
		if i < 0 {
			return false
		}
		for _, addr := range y.Addresses {
			if !slices.Contains(a.ENIs[i].Addresses, addr) {
				return false
			}
		}
	}
	return true
}
