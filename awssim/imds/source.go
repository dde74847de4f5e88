// Package imds serves the EC2 instance metadata service (IMDSv2) for one
// simulated instance, in the shape the aws-sdk-go-v2 feature/ec2/imds client
// expects. What it shows comes from a Source, which owns the lag behind EC2.
package imds

import (
	"log/slog"
	"time"
)

// Interface is one attached ENI as IMDS shows it under
// network/interfaces/macs/<mac>/.
type Interface struct {
	MAC, ENIID       string
	DeviceNumber     int
	SubnetID         string
	SubnetCIDR       string
	VPCID            string
	VPCCIDRs         []string
	SecurityGroupIDs []string
	// LocalIPv4s lists the ENI's private addresses, primary first.
	LocalIPv4s   []string
	IPv4Prefixes []string
}

// Metadata is everything IMDS shows for one instance at one moment.
type Metadata struct {
	InstanceID, InstanceType, AvailabilityZone, MAC, LocalIPv4 string
	Interfaces                                                 []Interface
	// AccountID, ImageID and PendingTime appear only in the instance
	// identity document.
	AccountID, ImageID string
	PendingTime        time.Time
}

// Source supplies what IMDS shows now for an instance. The source, not the
// handler, applies the lag behind EC2, so the handler stays a pure view.
type Source interface {
	Metadata(instanceID string) (Metadata, bool)
}

// Options configures a handler.
type Options struct {
	// TokenRequired makes metadata requests without a valid IMDSv2 token
	// fail with 401 (IMDSv2 "required" mode). Otherwise tokens are optional,
	// but an invalid or expired token presented is still refused.
	TokenRequired bool
	// Signer signs the instance identity document; without one the
	// signature is not served (404), as if the form were not offered.
	Signer *Signer
	Logger *slog.Logger
}
