package reconciler

import "time"

// Finding kinds.
const (
	// KindLeakedENI is an ENI in EC2 with our tags that etcd has no record
	// of and no open intent claims.
	KindLeakedENI = "leaked-eni"
	// KindMissingENI is a record of an ENI that EC2 does not show.
	KindMissingENI = "missing-eni"
	// KindUntaggedENI is a recorded (non-primary) ENI lacking our tags.
	KindUntaggedENI = "untagged-eni"
	// KindAddressDrift is an ENI whose addresses or prefixes differ
	// between etcd and EC2.
	KindAddressDrift = "address-drift"
	// KindAttachmentDrift is an ENI whose attachment differs between etcd
	// and EC2.
	KindAttachmentDrift = "attachment-drift"
	// KindSubnetUse is a subnet whose recorded use by others differs from
	// what EC2's free-address count implies.
	KindSubnetUse = "subnet-use"
	// KindSubnetRecord is a subnet record whose CIDR, zone, VPC or usable
	// size differs from EC2's, or whose attached or reserved counts differ
	// from the ENI and intent records they summarise.
	KindSubnetRecord = "subnet-record"
	// KindInstanceGone is a registered node whose instance EC2 reports
	// terminated or does not know.
	KindInstanceGone = "instance-gone"
)

// Actions a pass took (or will take) on a finding.
const (
	ActionReported  = "reported"
	ActionWatching  = "watching"  // seen once; acted on if seen again after the grace
	ActionCollected = "collected" // leaked ENI deleted
	ActionForgotten = "forgotten" // record removed
	ActionReleased  = "released"  // gone node's ENIs released, record removed
	ActionUpdated   = "updated"   // subnet use by others recorded
	ActionCorrected = "corrected" // subnet record set to what EC2 and the records say
	ActionSkipped   = "skipped"   // left alone this pass (in flight, or not safe)
	ActionFailed    = "failed"
)

// Finding is one disagreement between etcd and EC2.
type Finding struct {
	Kind       string `json:"kind"`
	ENIID      string `json:"eni_id,omitempty"`
	InstanceID string `json:"instance_id,omitempty"`
	SubnetID   string `json:"subnet_id,omitempty"`
	// Detail says what differs, in words.
	Detail string `json:"detail"`
	// Action is what the pass did about it; Check always says reported.
	Action string `json:"action"`
}

// Report is one comparison of etcd with EC2.
type Report struct {
	At time.Time `json:"at"`
	// ENIsInEC2 counts ENIs EC2 shows with our cluster tag; ENIsInEtcd the
	// ENI records (primaries included).
	ENIsInEC2  int       `json:"enis_in_ec2"`
	ENIsInEtcd int       `json:"enis_in_etcd"`
	Findings   []Finding `json:"findings"`
}

// Count returns how many findings are of kind.
func (r Report) Count(kind string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == kind {
			n++
		}
	}
	return n
}
