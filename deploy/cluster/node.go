package cluster

import (
	"errors"
	"fmt"
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
	return errors.Join(errs...)
}
