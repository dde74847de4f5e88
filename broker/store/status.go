package store

import (
	"context"
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"time"
)

// kindStatus holds one NodeStatus per node whose demand the engine cannot
// meet; docs/etcd.md lists it.
const kindStatus = "status"

// Unmet reasons the engine records in NodeStatus.Reason.
const (
	// UnmetBudget: the node's subnet has no budget left for the cluster.
	UnmetBudget = "budget_exhausted"
	// UnmetNodeFull: the node holds as many ENIs and addresses as it can.
	UnmetNodeFull = "node_full"
	// UnmetNotReady: the engine lacks something to plan with (instance
	// limits, the subnet, the primary ENI).
	UnmetNotReady = "not_ready"
	// UnmetQuarantined: a record of the node, or of its subnet, does not
	// decode; the node is left out of planning until it is fixed.
	UnmetQuarantined = "record_quarantined"
	// UnmetEC2Refused: EC2 refused a call for the node in a way that would
	// only repeat; the engine leaves the node alone for a long back-off.
	UnmetEC2Refused = "ec2_refused"
)

// NodeStatus says why the engine is not meeting a node's demand. Only the
// leader's engine writes it, and only when the reason changes, so agents
// (through WatchNode) and operators see it without the engine writing on
// every round. No record means nothing is known to stand in the way.
type NodeStatus struct {
	V          int    `json:"v"`
	InstanceID string `json:"instance_id"`
	// Reason is one of the Unmet constants.
	Reason string `json:"reason"`
	// Message is for people: for a budget refusal it names the subnet, its
	// limit and its use.
	Message string `json:"message"`
	// Since is when this reason was first recorded.
	Since     time.Time `json:"since"`
	UpdatedAt time.Time `json:"updated_at"`
	Rev       int64     `json:"-"`
}

func (r *NodeStatus) schema() int      { return r.V }
func (r *NodeStatus) setSchema()       { r.V = SchemaVersion }
func (r *NodeStatus) recordID() string { return r.InstanceID }
func (r *NodeStatus) setRev(rev int64) { r.Rev = rev }

// PutNodeStatus records why a node's demand is unmet. A record with the
// same reason and message is left alone (no write), and Since is kept
// while the reason stays the same. The node must be registered.
func (s *Store) PutNodeStatus(ctx context.Context, st NodeStatus) error {
	if err := checkID("node status", st.InstanceID); err != nil {
		return err
	}
	if st.Reason == "" {
		return fmt.Errorf("node status of %s: empty reason (use ClearNodeStatus): %w", st.InstanceID, rpcerr.ErrInvalid)
	}
	now := time.Now().UTC()
	if st.UpdatedAt.IsZero() {
		st.UpdatedAt = now
	}
	nodeKey, key := s.key(kindNodes, st.InstanceID), s.key(kindStatus, st.InstanceID)
	_, err := s.update(ctx, "PutNodeStatus", []string{nodeKey, key}, nil, func(v *view) error {
		if err := requireNode(v, nodeKey, st.InstanceID); err != nil {
			return err
		}
		var cur NodeStatus
		ok, err := get(v, kindStatus, st.InstanceID, &cur)
		if err != nil {
			return err
		}
		out := st
		switch {
		case ok && cur.Reason == st.Reason && cur.Message == st.Message:
			return nil
		case ok && cur.Reason == st.Reason:
			out.Since = cur.Since
		case out.Since.IsZero():
			out.Since = out.UpdatedAt
		}
		return v.put(key, &out)
	})
	return err
}

// ClearNodeStatus removes a node's status record; nothing is written when
// there is none.
func (s *Store) ClearNodeStatus(ctx context.Context, id string) error {
	if err := checkID("node status", id); err != nil {
		return err
	}
	key := s.key(kindStatus, id)
	_, err := s.update(ctx, "ClearNodeStatus", []string{key}, nil, func(v *view) error {
		kv, err := v.raw(key)
		if err != nil || kv == nil {
			return err
		}
		v.del(key)
		return nil
	})
	return err
}

// GetNodeStatus returns a node's status record; rpcerr.ErrNotFound if there is
// none.
func (s *Store) GetNodeStatus(ctx context.Context, id string) (NodeStatus, error) {
	return getOne[*NodeStatus](ctx, s, kindStatus, "status of node", id)
}

// ListNodeStatus returns every node status record by instance id.
func (s *Store) ListNodeStatus(ctx context.Context) (map[string]NodeStatus, error) {
	all, err := listAll[*NodeStatus](ctx, s, kindStatus)
	if err != nil {
		return nil, err
	}
	out := make(map[string]NodeStatus, len(all))
	for _, st := range all {
		out[st.InstanceID] = st
	}
	return out, nil
}
