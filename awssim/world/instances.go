package world

import (
	"maps"
	"slices"
	"time"
)

type instance struct {
	id, typ, az, subnetID, vpcID string
	imageID                      string
	launch                       time.Time
	tags                         map[string]string
	enis                         map[int]*eni // by device index; primary at 0
	seq                          uint64
}

// InstanceSpec describes an instance to add. ID, PrivateIP and
// SecurityGroupIDs are optional.
type InstanceSpec struct {
	ID               string            `json:"id,omitempty"`
	Type             string            `json:"type"`
	SubnetID         string            `json:"subnetId"`
	PrivateIP        string            `json:"privateIp,omitempty"`
	SecurityGroupIDs []string          `json:"securityGroupIds,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// Instance is a snapshot of a running instance.
type Instance struct {
	ID, Type, AvailabilityZone, SubnetID, VPCID string
	ImageID                                     string
	State                                       string
	LaunchTime                                  time.Time
	// PrivateIP and MAC are those of the primary ENI.
	PrivateIP, MAC string
	Tags           map[string]string
	// NetworkInterfaces are the attached ENIs by device index.
	NetworkInterfaces []NetworkInterface
	Seq               uint64
}

// AddInstance launches an instance with its primary ENI (device index 0,
// deleted on termination) taking one address of the subnet.
func (w *World) AddInstance(s InstanceSpec) (Instance, error) {
	var out Instance
	err := w.do(func(now time.Time) error {
		if _, ok := w.types[s.Type]; !ok {
			return errorf(CodeInvalidInstanceType, "The following supplied instance types do not exist: [%s]", shorten(s.Type))
		}
		if s.ID != "" && (!ValidID(PrefixInstance, s.ID) || w.ids[s.ID]) {
			return errorf(CodeInvalidParameterValue, "instance ID %q is malformed or taken (want i- and 8 or 17 hex digits)", s.ID)
		}
		// The world creates no security group on its own: an instance's
		// groups exist from its launch, in its VPC, for its ENIs and later
		// ones to use.
		if sn, ok := w.subnets[s.SubnetID]; ok {
			if err := w.addGroupsLocked(sn.vpcID, s.SecurityGroupIDs); err != nil {
				return err
			}
		}
		in := CreateNetworkInterfaceInput{
			SubnetID: s.SubnetID, PrimaryIP: s.PrivateIP, SecurityGroupIDs: s.SecurityGroupIDs,
			Description: "Primary network interface",
		}
		e, err := w.createENILocked(in, now)
		if err != nil {
			return err
		}
		// The primary ENI exists from launch: Describe shows it at once.
		e.createdAt = time.Time{}
		e.requesterMgd = true
		e.touch()
		inst := &instance{
			id: s.ID, typ: s.Type, az: e.subnet.az, subnetID: e.subnet.id, vpcID: e.subnet.vpcID,
			imageID: "ami-0abcdef1234567890", launch: now, tags: maps.Clone(s.Tags), enis: map[int]*eni{},
		}
		if inst.tags == nil {
			inst.tags = map[string]string{}
		}
		if inst.id == "" {
			inst.id = w.newIDLocked(PrefixInstance)
		}
		w.ids[inst.id] = true
		inst.seq = w.nextSeqLocked()
		w.instances[inst.id] = inst
		w.attachLocked(e, inst, 0, true, now)
		out = w.instanceViewLocked(inst)
		return nil
	})
	return out, err
}

// RemoveInstance terminates an instance: ENIs marked DeleteOnTermination are
// deleted with their addresses, the others are detached and left available.
func (w *World) RemoveInstance(id string) error {
	return w.do(func(time.Time) error {
		if err := CheckID(PrefixInstance, id); err != nil {
			return err
		}
		inst, ok := w.instances[id]
		if !ok {
			return instanceNotFound(id)
		}
		idx := slices.Sorted(maps.Keys(inst.enis))
		for _, i := range idx {
			e := inst.enis[i]
			del := e.att.DeleteOnTermination
			w.detachLocked(e)
			if del {
				w.deleteENILocked(e)
			}
		}
		delete(w.instances, id)
		delete(w.imds, id)
		delete(w.dirty, id)
		return nil
	})
}

// Instance returns one instance.
func (w *World) Instance(id string) (Instance, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	inst, ok := w.instances[id]
	if !ok {
		return Instance{}, false
	}
	return w.instanceViewLocked(inst), true
}

// Instances returns every instance in launch order.
func (w *World) Instances() []Instance {
	var out []Instance
	_ = w.do(func(time.Time) error {
		is := slices.SortedFunc(maps.Values(w.instances), func(a, b *instance) int { return cmpSeq(a.seq, b.seq) })
		out = make([]Instance, len(is))
		for i, inst := range is {
			out[i] = w.instanceViewLocked(inst)
		}
		return nil
	})
	return out
}

// InstanceType returns the catalog entry of a type.
func (w *World) InstanceType(name string) (InstanceType, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.types[name]
	return t, ok
}

func (w *World) instanceViewLocked(inst *instance) Instance {
	v := Instance{
		ID: inst.id, Type: inst.typ, AvailabilityZone: inst.az, SubnetID: inst.subnetID, VPCID: inst.vpcID,
		ImageID: inst.imageID, State: "running", LaunchTime: inst.launch, Tags: maps.Clone(inst.tags), Seq: inst.seq,
	}
	for _, i := range slices.Sorted(maps.Keys(inst.enis)) {
		v.NetworkInterfaces = append(v.NetworkInterfaces, *inst.enis[i].view())
	}
	if p, ok := inst.enis[0]; ok {
		v.PrivateIP, v.MAC = p.ips[0].String(), p.mac
	}
	return v
}
