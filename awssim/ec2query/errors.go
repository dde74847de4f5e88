package ec2query

import (
	"fmt"
	"net/http"
)

// Error is an EC2 API error: the HTTP status and the code and message of the
// <Response><Errors><Error> body.
type Error struct {
	Status  int    `xml:"-"`
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// Error implements error.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns a client error (HTTP 400) with the given code.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Codes used by the decoder itself.
const (
	CodeMalformedQueryString   = "MalformedQueryString"
	CodeMissingAction          = "MissingAction"
	CodeMissingParameter       = "MissingParameter"
	CodeUnknownParameter       = "UnknownParameter"
	CodeInvalidParameterValue  = "InvalidParameterValue"
	CodeInvalidAction          = "InvalidAction"
	CodeRequestLimitExceeded   = "RequestLimitExceeded"
	CodeInternalError          = "InternalError"
	CodeInvalidParameterCombo  = "InvalidParameterCombination"
	CodeUnsupportedHTTPMethod  = "UnsupportedHttpVerb"
	CodeRequestEntityTooLarge  = "RequestEntityTooLarge"
	CodeInvalidPaginationToken = "InvalidPaginationToken"
)
