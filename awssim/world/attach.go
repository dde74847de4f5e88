package world

import (
	"time"
)

// maxDeviceIndex bounds AttachNetworkInterface's DeviceIndex. EC2 accepts
// indexes beyond the ENI count; the count itself is what the type limits.
const maxDeviceIndex = 127

// AttachNetworkInterface attaches an available ENI to an instance at a
// device index and returns the attachment ID. The ENI is in use at once; IMDS
// shows it after IMDSLag.
func (w *World) AttachNetworkInterface(eniID, instanceID string, deviceIndex int) (string, error) {
	var out string
	err := w.do(func(now time.Time) error {
		e, err := w.eniLocked(eniID)
		if err != nil {
			return err
		}
		if err := CheckID(PrefixInstance, instanceID); err != nil {
			return err
		}
		inst, ok := w.instances[instanceID]
		if !ok {
			return instanceNotFound(instanceID)
		}
		if e.att != nil {
			return errorf(CodeENIInUse, "Interface: [%s] in use.", e.id)
		}
		if e.subnet.az != inst.az {
			return errorf(CodeInvalidParameterCombo, "The network interface %s and the instance %s are in different availability zones", e.id, inst.id)
		}
		if e.subnet.vpcID != inst.vpcID {
			return errorf(CodeInvalidParameterCombo, "The network interface %s and the instance %s are in different VPCs", e.id, inst.id)
		}
		if deviceIndex < 0 || deviceIndex > maxDeviceIndex {
			return errorf(CodeInvalidParameterValue, "Device index %d is out of range [0, %d]", deviceIndex, maxDeviceIndex)
		}
		t := w.types[inst.typ]
		if n := len(inst.enis) + 1; n > t.MaxENIs {
			return errorf(CodeAttachmentLimit, "Interface count %d exceeds the limit for %s", n, inst.typ)
		}
		if _, taken := inst.enis[deviceIndex]; taken {
			return errorf(CodeInvalidParameterValue, "Instance '%s' already has an interface attached at device index '%d'.", inst.id, deviceIndex)
		}
		if e.slots() > t.IPv4PerENI {
			return errorf(CodeAddressLimit, "Number of private addresses %d of %s exceeds the limit of %d for %s", e.slots(), e.id, t.IPv4PerENI, inst.typ)
		}
		if len(e.prefixes) > 0 && !t.Nitro {
			return errorf(CodeInvalidParameterValue, "%s has IPv4 prefixes, which %s (not Nitro) does not support", e.id, inst.typ)
		}
		out = w.attachLocked(e, inst, deviceIndex, false, now)
		return nil
	})
	return out, err
}

func (w *World) attachLocked(e *eni, inst *instance, deviceIndex int, deleteOnTermination bool, now time.Time) string {
	id := w.newIDLocked(PrefixAttachment)
	e.att = &Attachment{
		ID: id, InstanceID: inst.id, DeviceIndex: deviceIndex, DeleteOnTermination: deleteOnTermination,
		Status: AttachmentAttached, AttachTime: now,
	}
	e.status = StatusInUse
	e.touch()
	inst.enis[deviceIndex] = e
	w.attachments[id] = e
	w.dirty[inst.id] = true
	w.emitLocked(hookAttach, inst.id, e)
	return id
}

// DetachNetworkInterface starts detaching: the ENI is "detaching" at once
// and "available" DetachDelay later. The primary ENI cannot be detached.
// Detaching an ENI that is already detaching is a no-op.
func (w *World) DetachNetworkInterface(attachmentID string, force bool) error {
	return w.do(func(now time.Time) error {
		if err := CheckID(PrefixAttachment, attachmentID); err != nil {
			return err
		}
		e, ok := w.attachments[attachmentID]
		if !ok {
			return errorf(CodeAttachmentNotFound, "The attachment ID '%s' does not exist", attachmentID)
		}
		if e.att.DeviceIndex == 0 {
			return errorf(CodeOperationNotPermitted, "The network interface at device index 0 cannot be detached.")
		}
		if e.att.Status == AttachmentDetaching {
			return nil
		}
		e.att.Status = AttachmentDetaching
		e.status = StatusDetaching
		e.touch()
		delay := w.detachDelay
		if force {
			delay /= 2
		}
		if delay <= 0 {
			w.finishDetachLocked(e, attachmentID)
			return nil
		}
		w.scheduleLocked(now.Add(delay), func(w *World, _ time.Time) { w.finishDetachLocked(e, attachmentID) })
		return nil
	})
}

// finishDetachLocked completes a detach unless the ENI changed meanwhile.
func (w *World) finishDetachLocked(e *eni, attachmentID string) {
	if e.att == nil || e.att.ID != attachmentID || w.enis[e.id] != e {
		return
	}
	w.detachLocked(e)
}

// detachLocked removes e's attachment at once.
func (w *World) detachLocked(e *eni) {
	att := e.att
	w.emitLocked(hookDetach, att.InstanceID, e)
	if inst, ok := w.instances[att.InstanceID]; ok {
		delete(inst.enis, att.DeviceIndex)
		w.dirty[inst.id] = true
	}
	delete(w.attachments, att.ID)
	e.att = nil
	e.status = StatusAvailable
	e.touch()
}
