package reconciler

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
	"github.com/allotnet/allot/broker/executor"
	"github.com/allotnet/allot/broker/store"
)

// observation is one read of EC2 and then of etcd. EC2 is read first: an
// ENI created meanwhile is then already claimed in etcd, by an open create
// intent or by its record, when etcd is read.
type observation struct {
	at      time.Time
	cluster string

	tagged    map[string]ec2client.ENIInfo // ENIs with our cluster and owner tags
	described map[string]ec2client.ENIInfo // recorded ENIs found by ID (untagged ones, primaries)
	instances map[string]ec2client.InstanceInfo
	subnetsEC map[string]ec2client.SubnetInfo

	records  map[string]store.ENI
	nodes    []store.Node
	subnets  []store.Subnet
	open     []store.Intent
	claimed  map[string]bool // ENI IDs an open intent names
	tokens   map[string]bool // client tokens of open create intents
	openNode map[string]bool // nodes with an open intent
}

// observe reads EC2's ENIs under our tags, then etcd, then describes what
// the records name that EC2 did not list.
func (r *Reconciler) observe(ctx context.Context) (*observation, error) {
	o := &observation{
		at: r.cfg.Clock.Now(), cluster: r.cfg.Cluster,
		tagged: map[string]ec2client.ENIInfo{}, described: map[string]ec2client.ENIInfo{},
		instances: map[string]ec2client.InstanceInfo{}, subnetsEC: map[string]ec2client.SubnetInfo{},
		records: map[string]store.ENI{}, claimed: map[string]bool{}, tokens: map[string]bool{},
		openNode: map[string]bool{},
	}
	ours, err := r.cfg.EC2.DescribeENIs(ctx, ec2client.DescribeENIsInput{
		Tags: map[string]string{ec2client.TagCluster: r.cfg.Cluster, ec2client.TagOwner: ec2client.OwnerValue},
	})
	if err != nil {
		return nil, fmt.Errorf("describe our ENIs: %w", err)
	}
	for _, x := range ours {
		o.tagged[x.ID] = x
	}

	if err := r.readRecords(ctx, o); err != nil {
		return nil, err
	}
	if err := r.describeRest(ctx, o); err != nil {
		return nil, err
	}
	return o, nil
}

// readRecords reads etcd's side of the observation, as of one revision: a
// subnet's recorded figures then differ from the records they summarise
// only if they truly drifted, not because the engine wrote between reads.
func (r *Reconciler) readRecords(ctx context.Context, o *observation) error {
	recs, err := r.cfg.Store.ReadReconcile(ctx)
	if err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	for _, e := range recs.ENIs {
		o.records[e.ID] = e
	}
	o.nodes, o.subnets, o.open = recs.Nodes, recs.Subnets, recs.Open
	for _, in := range o.open {
		o.openNode[in.InstanceID] = true
		if in.ENIID != "" {
			o.claimed[in.ENIID] = true
		}
		if in.Kind == store.IntentCreate {
			o.tokens[in.ClientToken] = true
			o.tokens[in.ID] = true
		}
	}
	return nil
}

// describeRest describes what the records name and EC2 did not list under
// our tags: the recorded ENIs, the nodes' instances and the subnets.
func (r *Reconciler) describeRest(ctx context.Context, o *observation) error {
	// Records EC2 did not list under our tags: primaries, and anything
	// whose tags were lost or that is gone. Describe them by ID (an ID that
	// does not exist is simply absent).
	var ids []string
	for id := range o.records {
		if _, ok := o.tagged[id]; !ok {
			ids = append(ids, id)
		}
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		xs, err := r.cfg.EC2.DescribeENIs(ctx, ec2client.DescribeENIsInput{IDs: ids})
		if err != nil {
			return fmt.Errorf("describe recorded ENIs: %w", err)
		}
		for _, x := range xs {
			o.described[x.ID] = x
		}
	}

	if len(o.nodes) > 0 {
		nodeIDs := make([]string, len(o.nodes))
		for i, n := range o.nodes {
			nodeIDs[i] = n.InstanceID
		}
		insts, err := r.cfg.EC2.DescribeInstances(ctx, nodeIDs)
		if err != nil {
			return fmt.Errorf("describe instances: %w", err)
		}
		for _, i := range insts {
			o.instances[i.ID] = i
		}
	}
	if len(o.subnets) > 0 {
		subIDs := make([]string, len(o.subnets))
		for i, s := range o.subnets {
			subIDs[i] = s.ID
		}
		sns, err := r.cfg.EC2.DescribeSubnets(ctx, subIDs)
		if err != nil {
			return fmt.Errorf("describe subnets: %w", err)
		}
		for _, s := range sns {
			o.subnetsEC[s.ID] = s
		}
	}
	return nil
}

// inEC2 returns what EC2 showed of an ENI, by tag or by ID.
func (o *observation) inEC2(id string) (ec2client.ENIInfo, bool) {
	if x, ok := o.tagged[id]; ok {
		return x, true
	}
	x, ok := o.described[id]
	return x, ok
}

// isLeak reports whether a tagged ENI has neither a record nor an open
// intent that claims it (by ID or by the client token it carries).
func (o *observation) isLeak(x ec2client.ENIInfo) bool {
	if _, ok := o.records[x.ID]; ok || o.claimed[x.ID] {
		return false
	}
	if tok := x.Tags[executor.TagClientToken]; tok != "" && o.tokens[tok] {
		return false
	}
	return true
}

// gone reports whether EC2 says the node's instance no longer exists.
func (o *observation) gone(instanceID string) (bool, string) {
	i, ok := o.instances[instanceID]
	switch {
	case !ok:
		return true, "EC2 does not know the instance"
	case i.State == "terminated":
		return true, "EC2 reports the instance terminated"
	}
	return false, ""
}

// subnetTruth is what EC2 says of a subnet, and what the observed ENI and
// intent records say the cluster holds in it. A CIDR that does not parse
// leaves Usable at the record's (reported, never written).
func (o *observation) subnetTruth(id string, x ec2client.SubnetInfo) (t store.SubnetTruth, attached, reserved int64) {
	t = store.SubnetTruth{CIDR: x.CIDR, AvailabilityZone: x.AZ, VPCID: x.VPCID, Available: x.Available, Usable: -1}
	if u, err := store.UsableAddresses(x.CIDR); err == nil {
		t.Usable = u
	}
	for _, e := range o.records {
		if e.SubnetID == id {
			attached += e.Weight()
		}
	}
	for _, in := range o.open {
		if in.SubnetID == id {
			reserved += in.Reserved
		}
	}
	return t, attached, reserved
}

// subnetDrift describes how a subnet record differs from EC2 and from the
// records it summarises, with both values of each figure, or "".
func (o *observation) subnetDrift(sn store.Subnet, x ec2client.SubnetInfo) string {
	t, attached, reserved := o.subnetTruth(sn.ID, x)
	var parts []string
	if t.Usable < 0 {
		parts = append(parts, fmt.Sprintf("EC2 gives CIDR %q, which does not parse", x.CIDR))
	} else if t.Usable != sn.Usable {
		parts = append(parts, fmt.Sprintf("usable %d, EC2's CIDR %s gives %d", sn.Usable, x.CIDR, t.Usable))
	}
	if x.CIDR != sn.CIDR || x.AZ != sn.AvailabilityZone || x.VPCID != sn.VPCID {
		parts = append(parts, fmt.Sprintf("recorded %s in %s/%s, EC2 says %s in %s/%s",
			sn.CIDR, sn.AvailabilityZone, sn.VPCID, x.CIDR, x.AZ, x.VPCID))
	}
	if attached != sn.Attached {
		parts = append(parts, fmt.Sprintf("attached %d, the ENI records weigh %d", sn.Attached, attached))
	}
	if reserved != sn.Reserved {
		parts = append(parts, fmt.Sprintf("reserved %d, open intents hold %d", sn.Reserved, reserved))
	}
	return strings.Join(parts, "; ")
}

// recordDrifts reports whether the subnet's record differs from EC2 or
// from the records it summarises.
func (o *observation) recordDrifts(id string, x ec2client.SubnetInfo) bool {
	for _, sn := range o.subnets {
		if sn.ID == id {
			return o.subnetDrift(sn, x) != ""
		}
	}
	return false
}

// report lists every disagreement, each with Action reported.
func (o *observation) report() Report {
	rep := Report{At: o.at, ENIsInEC2: len(o.tagged), ENIsInEtcd: len(o.records)}
	add := func(f Finding) {
		f.Action = ActionReported
		rep.Findings = append(rep.Findings, f)
	}
	for _, id := range sortedKeys(o.tagged) {
		x := o.tagged[id]
		if o.isLeak(x) {
			add(Finding{Kind: KindLeakedENI, ENIID: id, InstanceID: x.Tags[ec2client.TagInstanceID], SubnetID: x.SubnetID,
				Detail: fmt.Sprintf("ENI with our tags (status %s, created %s) has no record and no open intent",
					x.Status, x.Tags[ec2client.TagCreatedAt])})
		}
	}
	for _, id := range sortedKeys(o.records) {
		rec := o.records[id]
		if o.claimed[id] {
			continue // an EC2 call on it is in flight; judged on a later pass
		}
		x, ok := o.inEC2(id)
		if !ok {
			add(Finding{Kind: KindMissingENI, ENIID: id, InstanceID: rec.InstanceID, SubnetID: rec.SubnetID,
				Detail: fmt.Sprintf("recorded %s ENI (status %s) does not exist in EC2", role(rec), rec.Status)})
			continue
		}
		if _, tagged := o.tagged[id]; !tagged && !rec.Primary {
			add(Finding{Kind: KindUntaggedENI, ENIID: id, InstanceID: rec.InstanceID, SubnetID: rec.SubnetID,
				Detail: "recorded ENI lacks the cluster/owner tags: leak collection would not recognise it"})
		}
		if d := addressDrift(rec, x); d != "" {
			add(Finding{Kind: KindAddressDrift, ENIID: id, InstanceID: rec.InstanceID, SubnetID: rec.SubnetID, Detail: d})
		}
		if d := attachmentDrift(rec, x); d != "" {
			add(Finding{Kind: KindAttachmentDrift, ENIID: id, InstanceID: rec.InstanceID, SubnetID: rec.SubnetID, Detail: d})
		}
	}
	for _, n := range o.nodes {
		if g, why := o.gone(n.InstanceID); g {
			add(Finding{Kind: KindInstanceGone, InstanceID: n.InstanceID, SubnetID: n.SubnetID, Detail: why})
		}
	}
	for _, sn := range o.subnets {
		x, ok := o.subnetsEC[sn.ID]
		if !ok {
			add(Finding{Kind: KindSubnetUse, SubnetID: sn.ID, Detail: "EC2 does not show the subnet"})
			continue
		}
		if d := o.subnetDrift(sn, x); d != "" {
			add(Finding{Kind: KindSubnetRecord, SubnetID: sn.ID, Detail: d})
		}
		t, attached, reserved := o.subnetTruth(sn.ID, x)
		if t.Usable < 0 {
			t.Usable = sn.Usable
		}
		if u := max(t.Usable-x.Available-attached, 0); u != sn.UsedByOthers {
			add(Finding{Kind: KindSubnetUse, SubnetID: sn.ID, Detail: fmt.Sprintf(
				"recorded used by others %d; EC2 implies %d (usable %d, available %d, ours %d, reserved %d)",
				sn.UsedByOthers, u, t.Usable, x.Available, attached, reserved)})
		}
	}
	return rep
}

func role(e store.ENI) string {
	if e.Primary {
		return "primary"
	}
	return "secondary"
}

// addressDrift describes how an ENI's addresses differ, or "".
func addressDrift(rec store.ENI, x ec2client.ENIInfo) string {
	var parts []string
	if l := minus(x.Addresses, rec.Addresses); len(l) > 0 {
		parts = append(parts, fmt.Sprintf("EC2 has addresses etcd lacks: %s", strings.Join(l, ",")))
	}
	if l := minus(rec.Addresses, x.Addresses); len(l) > 0 {
		parts = append(parts, fmt.Sprintf("etcd has addresses EC2 lacks: %s", strings.Join(l, ",")))
	}
	if l := minus(x.Prefixes, rec.Prefixes); len(l) > 0 {
		parts = append(parts, fmt.Sprintf("EC2 has prefixes etcd lacks: %s", strings.Join(l, ",")))
	}
	if l := minus(rec.Prefixes, x.Prefixes); len(l) > 0 {
		parts = append(parts, fmt.Sprintf("etcd has prefixes EC2 lacks: %s", strings.Join(l, ",")))
	}
	return strings.Join(parts, "; ")
}

// attachmentDrift describes how an ENI's attachment differs, or "".
func attachmentDrift(rec store.ENI, x ec2client.ENIInfo) string {
	attached := x.AttachmentID != "" && x.Status != "detaching"
	switch rec.Status {
	case store.ENIAttached:
		if !attached || x.InstanceID != rec.InstanceID {
			return fmt.Sprintf("recorded attached to %s; EC2 says status %s, instance %q", rec.InstanceID, x.Status, x.InstanceID)
		}
		if x.DeviceIndex != rec.DeviceIndex {
			return fmt.Sprintf("recorded at device index %d; EC2 says %d", rec.DeviceIndex, x.DeviceIndex)
		}
	case store.ENICreated, store.ENIDetached:
		if attached {
			return fmt.Sprintf("recorded %s; EC2 says attached to %q", rec.Status, x.InstanceID)
		}
	}
	return ""
}

func minus(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
