package cniwire

import (
	"fmt"

	"github.com/allotnet/allot/internal/pbwire"
)

// The plugin's side of the CNIService messages (proto/allot/v1/cni.proto),
// encoded by hand so that the plugin needs no generated code and no
// protobuf registry. Field numbers are the .proto's; the tests check each
// against the generated types.

// Attachment is allot.v1.Attachment.
type Attachment struct {
	Network, ContainerID, IfName string
}

// CNIRequest is allot.v1.CNIRequest.
type CNIRequest struct {
	Attachment   Attachment
	NetNS        string
	CNIVersion   string
	PodNamespace string
	PodName      string
	PrevResult   []byte
}

// GCRequest is allot.v1.CNIGCRequest.
type GCRequest struct {
	Network string
	Valid   []Attachment
}

// AddResult is allot.v1.CNIAddResult.
type AddResult struct {
	Address, Gateway, HostIfName, HostMAC, ContainerMAC, ENIID string
}

func appendAttachment(b []byte, a Attachment) []byte {
	b = appendString(b, 1, a.Network)
	b = appendString(b, 2, a.ContainerID)
	return appendString(b, 3, a.IfName)
}

// Marshal encodes r as allot.v1.CNIRequest.
func (r *CNIRequest) Marshal() []byte {
	b := appendBytes(nil, 1, appendAttachment(nil, r.Attachment))
	b = appendString(b, 2, r.NetNS)
	b = appendString(b, 3, r.CNIVersion)
	b = appendString(b, 4, r.PodNamespace)
	b = appendString(b, 5, r.PodName)
	if len(r.PrevResult) > 0 {
		b = appendBytes(b, 6, r.PrevResult)
	}
	return b
}

// Marshal encodes r as allot.v1.CNIGCRequest.
func (r *GCRequest) Marshal() []byte {
	b := appendString(nil, 1, r.Network)
	for _, a := range r.Valid {
		b = appendBytes(b, 2, appendAttachment(nil, a))
	}
	return b
}

// UnmarshalAddResult decodes allot.v1.CNIAddResult.
func UnmarshalAddResult(p []byte) (AddResult, error) {
	var r AddResult
	err := eachField(p, func(n pbwire.Number, _ uint64, b []byte) error {
		switch n {
		case 1:
			r.Address = string(b)
		case 2:
			r.Gateway = string(b)
		case 3:
			r.HostIfName = string(b)
		case 4:
			r.HostMAC = string(b)
		case 5:
			r.ContainerMAC = string(b)
		case 6:
			r.ENIID = string(b)
		}
		return nil
	})
	if err != nil {
		return AddResult{}, fmt.Errorf("add result: %w", err)
	}
	return r, nil
}
