package world

import "fmt"

// Error is a refusal EC2 would answer with an error code, such as
// InvalidNetworkInterfaceID.NotFound or InsufficientFreeAddressesInSubnet.
// The code and message are what the API returns.
type Error struct {
	Code    string
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Error codes the world returns.
const (
	CodeENINotFound            = "InvalidNetworkInterfaceID.NotFound"
	CodeENIMalformed           = "InvalidNetworkInterfaceID.Malformed"
	CodeInstanceNotFound       = "InvalidInstanceID.NotFound"
	CodeInstanceMalformed      = "InvalidInstanceID.Malformed"
	CodeSubnetNotFound         = "InvalidSubnetID.NotFound"
	CodeSubnetMalformed        = "InvalidSubnetID.Malformed"
	CodeAttachmentNotFound     = "InvalidAttachmentID.NotFound"
	CodeAttachmentMalformed    = "InvalidAttachmentID.Malformed"
	CodeInvalidID              = "InvalidID"
	CodeInvalidParameterValue  = "InvalidParameterValue"
	CodeInvalidParameterCombo  = "InvalidParameterCombination"
	CodeMissingParameter       = "MissingParameter"
	CodeAttachmentLimit        = "AttachmentLimitExceeded"
	CodeAddressLimit           = "PrivateIpAddressLimitExceeded"
	CodeInsufficientAddresses  = "InsufficientFreeAddressesInSubnet"
	CodeInsufficientCidrBlocks = "InsufficientCidrBlocks"
	CodeIdempotentMismatch     = "IdempotentParameterMismatch"
	CodeAddressInUse           = "InvalidIPAddress.InUse"
	CodeENIInUse               = "InvalidNetworkInterface.InUse"
	CodeOperationNotPermitted  = "OperationNotPermitted"
	CodeTagLimitExceeded       = "TagLimitExceeded"
	CodeInvalidInstanceType    = "InvalidInstanceType"
	CodeInvalidGroupNotFound   = "InvalidGroup.NotFound"
)

func eniNotFound(id string) *Error {
	return errorf(CodeENINotFound, "The networkInterface ID '%s' does not exist", id)
}

func instanceNotFound(id string) *Error {
	return errorf(CodeInstanceNotFound, "The instance ID '%s' does not exist", id)
}

func subnetNotFound(id string) *Error {
	return errorf(CodeSubnetNotFound, "The subnet ID '%s' does not exist", id)
}
