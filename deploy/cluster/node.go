package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/allotnet/allot/awssim/world"
)

// TerminateInstance is the node leaving as EC2 sees it: the instance is
// terminated (awssim RemoveInstance: ENIs with DeleteOnTermination go with
// it, any other is detached and left available), its IMDS stops and the
// data plane deletes its namespace. The node's agent must be stopped
// first (it died with the instance); its pods' namespaces are removed
// without DEL, as nothing runs there any more. Only the broker's
// reconciler, seeing EC2 report the instance gone, may release what the
// node held.
func (c *Cluster) TerminateInstance(n *Node) error {
	if n.Agent.Running() {
		return fmt.Errorf("%s: stop its agent before terminating the instance", n.Name)
	}
	c.mu.Lock()
	c.removed[n.InstanceID] = true
	var pods []*Pod
	for p := range c.pods {
		if p.Node == n {
			pods = append(pods, p)
		}
	}
	c.mu.Unlock()
	var errs []error
	for _, p := range pods {
		errs = append(errs, c.DropPod(p))
	}
	if err := c.Sim.RemoveInstance(n.InstanceID); err != nil {
		errs = append(errs, fmt.Errorf("terminate %s: %w", n.InstanceID, err))
	}
	if n.links != nil {
		n.links.close()
	}
	return errors.Join(errs...)
}

// AddNode launches another instance like like (same type and subnet), as
// an autoscaling group replacing a terminated node would, starts its agent
// and returns once the agent serves.
func (c *Cluster) AddNode(ctx context.Context, like *Node) (*Node, error) {
	c.mu.Lock()
	i := len(c.Nodes)
	c.mu.Unlock()
	inst, err := c.Sim.AddInstance(world.InstanceSpec{Type: c.cfg.InstanceType, SubnetID: like.SubnetID,
		Tags: map[string]string{"Name": fmt.Sprintf("node-%d", i), "role": "node"}})
	if err != nil {
		return nil, fmt.Errorf("launch an instance: %w", err)
	}
	launched := time.Now()
	if err := c.Plane.Sync(ctx); err != nil {
		return nil, fmt.Errorf("data plane: %w", err)
	}
	c.log.Info("instance launched", "instance", inst.ID, "data_plane_sync", time.Since(launched).Round(time.Millisecond))
	raw, err := c.readConflist()
	if err != nil {
		return nil, err
	}
	n, err := c.startNode(raw, i, inst)
	if err != nil {
		return n, err
	}
	if err := n.Agent.WaitReady(ctx); err != nil {
		return n, fmt.Errorf("%s (%s): %w", n.Name, n.InstanceID, err)
	}
	return n, nil
}
