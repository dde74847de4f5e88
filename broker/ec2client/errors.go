package ec2client

import (
	"errors"
	"fmt"
	"strings"
)

// EC2 error codes the broker acts on.
const (
	CodeRequestLimitExceeded        = "RequestLimitExceeded"
	CodeInvalidParameterValue       = "InvalidParameterValue"
	CodeAttachmentLimitExceeded     = "AttachmentLimitExceeded"
	CodePrivateIPAddressLimit       = "PrivateIpAddressLimitExceeded"
	CodeInsufficientFreeAddresses   = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks      = "InsufficientCidrBlocks"
	CodeIdempotentParameterMismatch = "IdempotentParameterMismatch"
	CodeNetworkInterfaceNotFound    = "InvalidNetworkInterfaceID.NotFound"
	CodeAttachmentNotFound          = "InvalidAttachmentID.NotFound"
	// codeThrottling is what some AWS services say instead.
	codeThrottling = "Throttling"
)

// APIError is every error a Client method returns. Code and Message are
// EC2's when EC2 answered with an error; both are empty when the call never
// got an answer (a canceled context, a connection error), and Err then says
// what happened.
type APIError struct {
	Action  string
	Code    string
	Message string
	Err     error
}

func (e *APIError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("ec2 %s: %s: %s", e.Action, e.Code, e.Message)
	}
	return fmt.Sprintf("ec2 %s: %v", e.Action, e.Err)
}

// Unwrap returns the underlying SDK or context error.
func (e *APIError) Unwrap() error { return e.Err }

// Code returns the EC2 error code in err's chain, or "".
func Code(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// IsNotFound reports whether EC2 said a resource does not exist (any
// "*.NotFound" code, e.g. InvalidNetworkInterfaceID.NotFound).
func IsNotFound(err error) bool { return strings.HasSuffix(Code(err), ".NotFound") }

// IsThrottle reports whether EC2 throttled the call.
func IsThrottle(err error) bool {
	c := Code(err)
	return c == CodeRequestLimitExceeded || c == codeThrottling
}

// IsServerError reports whether EC2 failed on its side (HTTP 5xx:
// InternalError, Unavailable…): the request was not refused, and the same
// request may well succeed when sent again. Whether it took effect is not
// known.
func IsServerError(err error) bool {
	switch Code(err) {
	case "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable":
		return true
	}
	return false
}

// IsMalformed reports whether EC2 rejected an ID as malformed.
func IsMalformed(err error) bool { return strings.HasSuffix(Code(err), ".Malformed") }

// IsAddressShortage reports whether the subnet could not supply the
// addresses or prefixes asked for.
func IsAddressShortage(err error) bool {
	c := Code(err)
	return c == CodeInsufficientFreeAddresses || c == CodeInsufficientCidrBlocks
}

// IsRefusal reports whether EC2 refused the request for what it asks, so
// the same request would only be refused again: a parameter combination
// EC2 rejects (an ENI in one zone attached to an instance in another), a
// missing permission, a subnet that does not exist. Retrying it soon only
// turns into a loop of calls.
func IsRefusal(err error) bool {
	switch Code(err) {
	case "InvalidParameterCombination", "UnauthorizedOperation", "InvalidSubnetID.NotFound",
		"InvalidSubnetID.Malformed", "OptInRequired", "InvalidGroup.NotFound":
		return true
	}
	return false
}
