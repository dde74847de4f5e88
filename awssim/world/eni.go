package world

import (
	"maps"
	"net/netip"
	"slices"
	"time"
)

// ENI and attachment states, as EC2 names them.
const (
	StatusAvailable = "available"
	StatusAttaching = "attaching"
	StatusInUse     = "in-use"
	StatusDetaching = "detaching"

	AttachmentAttached  = "attached"
	AttachmentDetaching = "detaching"
)

// NetworkInterface is an immutable snapshot of an ENI. Snapshots are shared:
// callers must not modify their slices or maps.
type NetworkInterface struct {
	ID               string `json:"id"`
	SubnetID         string `json:"subnetId"`
	VPCID            string `json:"vpcId"`
	AvailabilityZone string `json:"availabilityZone"`
	OwnerID          string `json:"ownerId,omitempty"`
	Description      string `json:"description,omitempty"`
	MAC              string `json:"mac"`
	InterfaceType    string `json:"interfaceType"`
	Status           string `json:"status"`
	// PrivateIP is the primary address; SecondaryIPs are the others in the
	// order they were assigned.
	PrivateIP       string            `json:"privateIp"`
	SecondaryIPs    []string          `json:"secondaryIps,omitempty"`
	Prefixes        []string          `json:"prefixes,omitempty"` // "10.0.1.16/28"
	SecurityGroups  []string          `json:"securityGroups"`
	Tags            map[string]string `json:"tags,omitempty"`
	Attachment      *Attachment       `json:"attachment,omitempty"`
	SourceDestCheck bool              `json:"sourceDestCheck"`
	// RequesterManaged is true for ENIs created with an instance (primary).
	RequesterManaged bool      `json:"requesterManaged"`
	CreatedAt        time.Time `json:"createdAt"`
	// Seq orders ENIs by creation; pagination relies on it.
	Seq uint64 `json:"-"`
}

// Attachment is an ENI's attachment to an instance.
type Attachment struct {
	ID                  string    `json:"id"`
	InstanceID          string    `json:"instanceId"`
	DeviceIndex         int       `json:"deviceIndex"`
	DeleteOnTermination bool      `json:"deleteOnTermination"`
	Status              string    `json:"status"`
	AttachTime          time.Time `json:"attachTime"`
}

// Slots is the address slots the ENI uses: primary, secondaries, prefixes.
func (n *NetworkInterface) Slots() int { return 1 + len(n.SecondaryIPs) + len(n.Prefixes) }

type eni struct {
	id            string
	owner         string
	subnet        *subnet
	description   string
	mac           string
	groups        []string
	ips           []netip.Addr // ips[0] is the primary
	prefixes      []netip.Prefix
	tags          map[string]string
	att           *Attachment
	status        string
	createdAt     time.Time
	seq           uint64
	srcDstCheck   bool
	requesterMgd  bool
	interfaceType string
	cached        *NetworkInterface
}

// touch drops the cached snapshot after a change.
func (e *eni) touch() { e.cached = nil }

func (e *eni) slots() int { return len(e.ips) + len(e.prefixes) }

func (e *eni) view() *NetworkInterface {
	if e.cached != nil {
		return e.cached
	}
	v := &NetworkInterface{
		ID: e.id, OwnerID: e.owner, SubnetID: e.subnet.id, VPCID: e.subnet.vpcID, AvailabilityZone: e.subnet.az,
		Description: e.description, MAC: e.mac, InterfaceType: e.interfaceType, Status: e.status,
		PrivateIP: e.ips[0].String(), SecurityGroups: slices.Clone(e.groups), Tags: maps.Clone(e.tags),
		SourceDestCheck: e.srcDstCheck, RequesterManaged: e.requesterMgd, CreatedAt: e.createdAt, Seq: e.seq,
	}
	for _, a := range e.ips[1:] {
		v.SecondaryIPs = append(v.SecondaryIPs, a.String())
	}
	for _, p := range e.prefixes {
		v.Prefixes = append(v.Prefixes, p.String())
	}
	if e.att != nil {
		a := *e.att
		v.Attachment = &a
	}
	e.cached = v
	return v
}

// CreateNetworkInterfaceInput is CreateNetworkInterface's request. Exactly
// one way of choosing secondary addresses may be used: a count, a list, a
// prefix count or a prefix list.
type CreateNetworkInterfaceInput struct {
	SubnetID         string            `json:"subnetId"`
	Description      string            `json:"description,omitempty"`
	SecurityGroupIDs []string          `json:"groups,omitempty"`
	PrimaryIP        string            `json:"primaryIp,omitempty"`
	SecondaryIPs     []string          `json:"secondaryIps,omitempty"`
	SecondaryCount   int               `json:"secondaryCount,omitempty"`
	PrefixCount      int               `json:"prefixCount,omitempty"`
	Prefixes         []string          `json:"prefixes,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
	InterfaceType    string            `json:"interfaceType,omitempty"`
	ClientToken      string            `json:"-"`
}

// CreateNetworkInterface creates an available ENI in a subnet with all its
// addresses, or nothing. With a ClientToken seen before it returns the ENI
// that request created (IdempotentParameterMismatch if the parameters differ).
func (w *World) CreateNetworkInterface(in CreateNetworkInterfaceInput) (NetworkInterface, error) {
	var out NetworkInterface
	err := w.do(func(now time.Time) error {
		if in.ClientToken != "" {
			if v, ok, err := w.replayLocked(in); ok || err != nil {
				out = v
				return err
			}
		}
		e, err := w.createENILocked(in, now)
		if err != nil {
			return err
		}
		if in.ClientToken != "" {
			w.rememberLocked(in, e)
		}
		out = *e.view()
		return nil
	})
	return out, err
}

func (w *World) createENILocked(in CreateNetworkInterfaceInput, now time.Time) (*eni, error) {
	if err := CheckID(PrefixSubnet, in.SubnetID); err != nil {
		return nil, err
	}
	sn, ok := w.subnets[in.SubnetID]
	if !ok {
		return nil, subnetNotFound(in.SubnetID)
	}
	if len(in.Description) > 255 {
		return nil, errorf(CodeInvalidParameterValue, "Description must be at most 255 characters")
	}
	if err := validateTags(in.Tags); err != nil {
		return nil, err
	}
	secondaries := in.SecondaryCount > 0 || len(in.SecondaryIPs) > 0
	prefixes := in.PrefixCount > 0 || len(in.Prefixes) > 0
	switch {
	case in.SecondaryCount < 0 || in.PrefixCount < 0:
		return nil, errorf(CodeInvalidParameterValue, "Address and prefix counts must not be negative")
	case in.SecondaryCount > 0 && len(in.SecondaryIPs) > 0:
		return nil, errorf(CodeInvalidParameterCombo, "You can't specify a count of private IPv4 addresses together with specific private IPv4 addresses")
	case in.PrefixCount > 0 && len(in.Prefixes) > 0:
		return nil, errorf(CodeInvalidParameterCombo, "You can't specify a count of IPv4 prefixes together with specific IPv4 prefixes")
	case secondaries && prefixes:
		return nil, errorf(CodeInvalidParameterCombo, "You can't specify private IPv4 addresses and IPv4 prefixes in the same request")
	}
	slots := 1 + in.SecondaryCount + len(in.SecondaryIPs) + in.PrefixCount + len(in.Prefixes)
	if slots > maxSlotsAnyType {
		return nil, errorf(CodeAddressLimit, "Number of private addresses will exceed limit of %d.", maxSlotsAnyType)
	}
	groups := slices.Clone(in.SecurityGroupIDs)
	if len(groups) == 0 {
		groups = []string{w.vpcs[sn.vpcID].defaultGroup}
	}
	for _, g := range groups {
		if !ValidID(PrefixSG, g) {
			return nil, errorf("InvalidSecurityGroupID.Malformed", "Invalid id: %q (expecting \"sg-...\")", shorten(g))
		}
	}
	for _, g := range groups {
		if _, ok := w.groups[g]; !ok {
			return nil, errorf(CodeInvalidGroupNotFound, "The security group '%s' does not exist", g)
		}
	}
	e := &eni{
		owner: w.accountID, subnet: sn, description: in.Description, groups: groups, tags: maps.Clone(in.Tags),
		status: StatusAvailable, createdAt: now, srcDstCheck: true, interfaceType: in.InterfaceType,
	}
	if e.tags == nil {
		e.tags = map[string]string{}
	}
	if e.interfaceType == "" {
		e.interfaceType = "interface"
	}
	// Allocate everything, rolling back on the first failure.
	var explicit []string
	if in.PrimaryIP != "" {
		explicit = append(explicit, in.PrimaryIP)
	}
	explicit = append(explicit, in.SecondaryIPs...)
	if _, _, err := w.allocateLocked(e, explicit, in.SecondaryCount+boolInt(in.PrimaryIP == ""), in.Prefixes, in.PrefixCount); err != nil {
		return nil, err
	}
	if in.PrimaryIP == "" && len(in.SecondaryIPs) > 0 {
		// The primary was counted as one generated address; it was appended
		// after the explicit secondaries, so move it to the front.
		last := e.ips[len(e.ips)-1]
		copy(e.ips[1:], e.ips[:len(e.ips)-1])
		e.ips[0] = last
	}
	e.id = w.newIDLocked(PrefixENI)
	e.mac = w.newMACLocked()
	e.seq = w.nextSeqLocked()
	w.enis[e.id] = e
	return e, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// DeleteNetworkInterface deletes an available ENI and frees its addresses.
func (w *World) DeleteNetworkInterface(id string) error {
	return w.do(func(time.Time) error {
		e, err := w.eniLocked(id)
		if err != nil {
			return err
		}
		if e.att != nil {
			return errorf(CodeInvalidParameterValue, "Network interface '%s' is currently in use.", id)
		}
		w.deleteENILocked(e)
		return nil
	})
}

func (w *World) deleteENILocked(e *eni) {
	for _, a := range e.ips {
		e.subnet.pool.release(a)
	}
	for _, p := range e.prefixes {
		e.subnet.pool.releasePrefix(p)
	}
	delete(w.enis, e.id)
}

// eniLocked finds an ENI, checking the ID's form first.
func (w *World) eniLocked(id string) (*eni, error) {
	if err := CheckID(PrefixENI, id); err != nil {
		return nil, err
	}
	e, ok := w.enis[id]
	if !ok {
		return nil, eniNotFound(id)
	}
	return e, nil
}

// ModifyNetworkInterfaceInput changes one ENI; nil fields are left alone.
type ModifyNetworkInterfaceInput struct {
	ID string
	// AttachmentID must name the current attachment when DeleteOnTermination is set.
	AttachmentID        string
	DeleteOnTermination *bool
	Description         *string
	SourceDestCheck     *bool
	SecurityGroupIDs    []string
}

// ModifyNetworkInterfaceAttribute applies in.
func (w *World) ModifyNetworkInterfaceAttribute(in ModifyNetworkInterfaceInput) error {
	return w.do(func(time.Time) error {
		e, err := w.eniLocked(in.ID)
		if err != nil {
			return err
		}
		if in.DeleteOnTermination != nil {
			if in.AttachmentID == "" {
				return errorf(CodeMissingParameter, "The request must contain the parameter Attachment.AttachmentId")
			}
			if e.att == nil || e.att.ID != in.AttachmentID {
				return errorf(CodeAttachmentNotFound, "The attachment ID '%s' does not exist", in.AttachmentID)
			}
		}
		for _, g := range in.SecurityGroupIDs {
			if !ValidID(PrefixSG, g) {
				return errorf("InvalidSecurityGroupID.Malformed", "Invalid id: %q (expecting \"sg-...\")", shorten(g))
			}
		}
		if in.Description != nil && len(*in.Description) > 255 {
			return errorf(CodeInvalidParameterValue, "Description must be at most 255 characters")
		}
		if in.DeleteOnTermination != nil {
			e.att.DeleteOnTermination = *in.DeleteOnTermination
		}
		if in.Description != nil {
			e.description = *in.Description
		}
		if in.SourceDestCheck != nil {
			e.srcDstCheck = *in.SourceDestCheck
		}
		if len(in.SecurityGroupIDs) > 0 {
			e.groups = slices.Clone(in.SecurityGroupIDs)
			if e.att != nil {
				w.dirty[e.att.InstanceID] = true
			}
		}
		e.touch()
		return nil
	})
}

// NetworkInterface returns one ENI regardless of the consistency window.
func (w *World) NetworkInterface(id string) (NetworkInterface, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.enis[id]
	if !ok {
		return NetworkInterface{}, false
	}
	return *e.view(), true
}

// NetworkInterfaces returns the ENIs Describe shows now, in creation
// order. Within the consistency window EC2's reads lag its writes: an ENI
// created in it is hidden, and one attached in it still shows available
// with no attachment. The snapshots are shared and must not be modified.
func (w *World) NetworkInterfaces() []*NetworkInterface {
	var out []*NetworkInterface
	_ = w.do(func(now time.Time) error {
		out = make([]*NetworkInterface, 0, len(w.enis))
		for _, e := range w.enis {
			if !w.visibleLocked(e, now) {
				continue
			}
			v := e.view()
			if a := v.Attachment; a != nil && a.DeviceIndex > 0 && w.consistency > 0 && now.Before(a.AttachTime.Add(w.consistency)) {
				stale := *v
				stale.Attachment, stale.Status = nil, StatusAvailable
				v = &stale
			}
			out = append(out, v)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b *NetworkInterface) int { return cmpSeq(a.Seq, b.Seq) })
	return out
}

// visibleLocked reports whether Describe shows the ENI now.
func (w *World) visibleLocked(e *eni, now time.Time) bool {
	return w.consistency <= 0 || !now.Before(e.createdAt.Add(w.consistency))
}

// AllNetworkInterfaces returns every ENI, including those Describe does not
// show yet, in creation order.
func (w *World) AllNetworkInterfaces() []*NetworkInterface {
	w.mu.Lock()
	out := make([]*NetworkInterface, 0, len(w.enis))
	for _, e := range w.enis {
		out = append(out, e.view())
	}
	w.mu.Unlock()
	slices.SortFunc(out, func(a, b *NetworkInterface) int { return cmpSeq(a.Seq, b.Seq) })
	return out
}
