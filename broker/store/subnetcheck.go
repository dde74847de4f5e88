package store

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// SubnetTruth is what EC2's DescribeSubnets says of a subnet, with Usable
// already computed from its CIDR.
type SubnetTruth struct {
	CIDR             string
	AvailabilityZone string
	VPCID            string
	Usable           int64
	// Available is EC2's free-address count.
	Available int64
}

// SubnetCorrection is what CorrectSubnet found and did.
type SubnetCorrection struct {
	Before, After Subnet
	// Corrected lists each figure that disagreed, with both values.
	Corrected []string
	// OthersSkipped is set when used-by-others was left alone because the
	// cluster's use moved since the observation or a call is in flight.
	OthersSkipped bool
}

// correctAttempts bounds CorrectSubnet's attempts. Its transaction compares
// every ENI and intent record, and each failed attempt reads them all
// again: during a burst they change every few milliseconds, and 64
// attempts of a cluster's whole ENI and intent records cost more than
// the correction is worth. It gives up with ErrConflict instead; the next
// reconciler pass tries again.
const correctAttempts = 4

// CorrectSubnet checks a subnet record against EC2 and against the
// records it summarises, in one transaction: CIDR, zone, VPC and Usable
// must be EC2's; Attached must be the weight of the subnet's ENI records;
// Reserved the sum of its open intents' reservations. Anything else is
// corrected. Used-by-others becomes usable - available - attached, but
// only when nothing is reserved and the ENI records still weigh
// observedAttached (what they weighed when EC2 was read): otherwise EC2's
// free count and ours may disagree on what is ours. The budget (Headroom,
// Cap) is the operator's and is not touched.
func (s *Store) CorrectSubnet(ctx context.Context, id string, t SubnetTruth, observedAttached int64) (SubnetCorrection, error) {
	if err := checkID("subnet", id); err != nil {
		return SubnetCorrection{}, err
	}
	var c SubnetCorrection
	key := s.key(kindSubnets, id)
	_, err := s.updateN(ctx, "CorrectSubnet", correctAttempts, []string{key}, []string{s.dir(kindENIs), s.dir(kindIntents)}, func(v *view) error {
		c = SubnetCorrection{}
		ok, err := get(v, kindSubnets, id, &c.Before)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("subnet %s: %w", id, rpcerr.ErrNotFound)
		}
		attached, reserved, err := subnetUse(v, id)
		if err != nil {
			return err
		}
		c.After = c.Before
		c.correct(t, attached, reserved)
		if reserved != 0 || attached != observedAttached {
			c.OthersSkipped = true
		} else if u := max(t.Usable-t.Available-attached, 0); u != c.After.UsedByOthers {
			c.Corrected = append(c.Corrected, fmt.Sprintf("used by others %d, EC2 implies %d", c.After.UsedByOthers, u))
			c.After.UsedByOthers = u
		}
		if len(c.Corrected) == 0 {
			return nil
		}
		return v.put(key, &c.After)
	})
	return c, err
}

// correct sets the figures EC2 and the ENI and intent records dictate.
func (c *SubnetCorrection) correct(t SubnetTruth, attached, reserved int64) {
	a := &c.After
	fix := func(what string, have, want int64, source string, set *int64) {
		if have != want {
			c.Corrected = append(c.Corrected, fmt.Sprintf("%s %d, %s %d", what, have, source, want))
			*set = want
		}
	}
	fixS := func(what, have, want string, set *string) {
		if want != "" && have != want {
			c.Corrected = append(c.Corrected, fmt.Sprintf("%s %q, EC2 says %q", what, have, want))
			*set = want
		}
	}
	fixS("cidr", a.CIDR, t.CIDR, &a.CIDR)
	fixS("zone", a.AvailabilityZone, t.AvailabilityZone, &a.AvailabilityZone)
	fixS("vpc", a.VPCID, t.VPCID, &a.VPCID)
	fix("usable", a.Usable, t.Usable, "EC2's CIDR gives", &a.Usable)
	fix("attached", a.Attached, attached, "the ENI records weigh", &a.Attached)
	fix("reserved", a.Reserved, reserved, "open intents hold", &a.Reserved)
}

// subnetUse is the weight of the subnet's ENI records and the sum of its
// open intents' reservations.
func subnetUse(v *view, id string) (attached, reserved int64, err error) {
	enis, err := list[*ENI](v, kindENIs)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range enis {
		if e.SubnetID == id {
			attached += e.Weight()
		}
	}
	ins, err := list[*Intent](v, kindIntents)
	if err != nil {
		return 0, 0, err
	}
	for _, in := range ins {
		if in.State == IntentOpen && in.SubnetID == id {
			reserved += in.Reserved
		}
	}
	return attached, reserved, nil
}

// UsableAddresses is an IPv4 CIDR's size minus the 5 addresses AWS
// reserves in every subnet.
func UsableAddresses(cidr string) (int64, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil || !p.Addr().Is4() {
		return 0, fmt.Errorf("bad IPv4 CIDR %q: %w", cidr, rpcerr.ErrInvalid)
	}
	return max(int64(1)<<(32-p.Bits())-5, 0), nil
}

// ReconcileRecords are the records the reconciler compares with EC2, all
// as of one etcd revision: a subnet record's attached and reserved
// figures then agree with the ENI records and open intents beside them
// unless they truly drifted, however busy the engine is.
type ReconcileRecords struct {
	Rev     int64
	ENIs    []ENI    // by ID
	Nodes   []Node   // by instance ID
	Subnets []Subnet // by ID
	Open    []Intent // the open intents, oldest first
}

// ReadReconcile reads every ENI, node, subnet and open intent in one
// transaction. Like the List methods, a record that does not decode fails
// the read.
func (s *Store) ReadReconcile(ctx context.Context) (ReconcileRecords, error) {
	var r ReconcileRecords
	dirs := []string{s.dir(kindENIs), s.dir(kindNodes), s.dir(kindSubnets)}
	err := s.readView(ctx, nil, dirs, func(v *view) error {
		r = ReconcileRecords{Rev: v.rev}
		var err error
		if r.ENIs, err = list[*ENI](v, kindENIs); err != nil {
			return err
		}
		if r.Nodes, err = list[*Node](v, kindNodes); err != nil {
			return err
		}
		r.Subnets, err = list[*Subnet](v, kindSubnets)
		return err
	})
	if err != nil {
		return ReconcileRecords{}, err
	}
	// The intents as of the same revision, read apart a page at a time
	// (openIntents).
	if r.Open, _, err = s.openIntents(ctx, r.Rev); err != nil {
		return ReconcileRecords{}, err
	}
	slices.SortFunc(r.ENIs, enisByID)
	slices.SortFunc(r.Nodes, nodesByID)
	slices.SortFunc(r.Subnets, subnetsByID)
	return r, nil
}
