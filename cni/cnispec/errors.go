// Package cnispec is the plugin's side of the CNI protocol: reading the
// command from the environment and stdin, negotiating the spec version,
// and writing errors and results, as the CNI library's skel, version and
// types packages do, without linking them.
//
// The plugin binary is executed for every pod. Linking the CNI library
// costs each exec its package initialisation and a larger binary to fault
// in, and its types package links net, which makes a cgo-enabled build of
// the plugin a dynamically linked executable (the dynamic loader then runs
// on every exec). This package does what the plugin needs of the library
// with encoding/json, net/netip and golang.org/x/sys/unix. Its behaviour is
// the library's in every error and version case: the tests run both and
// compare (the library stays a dependency of the tests and of the other
// binaries).
package cnispec

import (
	"encoding/json"
	"fmt"
	"io"
)

// The spec's error codes (the CNI library's types.Err* constants).
const (
	ErrUnknown                     uint = 0
	ErrIncompatibleCNIVersion      uint = 1
	ErrUnsupportedField            uint = 2
	ErrUnknownContainer            uint = 3
	ErrInvalidEnvironmentVariables uint = 4
	ErrIOFailure                   uint = 5
	ErrDecodingFailure             uint = 6
	ErrInvalidNetworkConfig        uint = 7
	ErrInvalidNetNS                uint = 8
	ErrTryAgainLater               uint = 11
	ErrPluginNotAvailable          uint = 50
	ErrLimitedConnectivity         uint = 51
	ErrInternal                    uint = 999
)

// Error is a CNI error as the plugin prints it on stdout.
type Error struct {
	Code    uint   `json:"code"`
	Msg     string `json:"msg"`
	Details string `json:"details,omitempty"`
}

// NewError returns an Error.
func NewError(code uint, msg, details string) *Error {
	return &Error{Code: code, Msg: msg, Details: details}
}

func (e *Error) Error() string {
	if e.Details == "" {
		return e.Msg
	}
	return fmt.Sprintf("%v; %v", e.Msg, e.Details)
}

// Print writes e to w as the library prints an error: JSON indented by
// four spaces, no newline at the end.
func (e *Error) Print(w io.Writer) error {
	b, err := json.MarshalIndent(e, "", "    ")
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
