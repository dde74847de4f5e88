package executor_test

import (
	"slices"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/clock"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/broker/subnets"
)

// A pod network that names only a subnet tag sends a matching node's new
// ENIs to the subnet carrying the tag, once the leader's discovery has
// resolved it; untagged subnets of the zone get none.
func TestNewENIsGoToTaggedSubnets(t *testing.T) {
	e := newEnv(t, envOpts{scenario: podSubnetsWorld("c5.xlarge", 1)})
	if err := e.sim.World().CreateTags([]string{podSubnet2}, map[string]string{"allot/pods": "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutPodNetwork(ctxT(t), store.PodNetwork{
		Name: "pods-a", Selector: store.NodeSelector{AvailabilityZone: "us-east-1a"},
		SubnetTags: map[string]string{"allot/pods": "a"}, UpdatedAt: time.Now(),
	}, 0); err != nil {
		t.Fatal(err)
	}
	d := subnets.New(subnets.Config{EC2: e.ec2, Store: e.st, Clock: clock.Real()})
	if _, err := d.Refresh(ctxT(t)); err != nil {
		t.Fatalf("discovery pass: %v", err)
	}
	inst := e.insts[0]
	e.register(t, inst, 20, 0, nil)
	e.start(t, executor.Config{})
	waitFor(t, "20 addresses", 60*time.Second, func() (bool, error) {
		return e.satisfied(ctxT(t), map[string]int{inst.ID: 20})
	})
	got := e.newENIs(t, inst.ID)
	if len(got) == 0 {
		t.Fatal("no new ENI")
	}
	for _, x := range got {
		if x.SubnetID != podSubnet2 {
			t.Errorf("new ENI %s is in %s; want the tagged %s", x.ID, x.SubnetID, podSubnet2)
		}
	}
	pn, err := e.st.GetPodNetwork(ctxT(t), "pods-a")
	if err != nil || !slices.Equal(pn.Discovered, []string{podSubnet2}) {
		t.Errorf("pod network discovered %v, %v; want [%s]", pn.Discovered, err, podSubnet2)
	}
}
