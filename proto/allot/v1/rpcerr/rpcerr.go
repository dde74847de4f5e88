// Package rpcerr is the broker API's error contract, kept beside the
// protos as etcd keeps rpctypes in its api module: the domain sentinels
// (errors.go) and the one table between them and gRPC status codes, in both
// directions. The broker's store returns the sentinels and its server turns
// them into statuses with deliberate codes; a client (allotctl, the agent)
// turns a status back into an error that errors.Is matches against the same
// sentinel. It links no etcd and nothing of the broker.
package rpcerr

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrUnavailable is what a client gets back for codes.Unavailable: the
// broker (or its etcd) cannot be reached right now; retry, perhaps another
// replica.
var ErrUnavailable = errors.New("broker unavailable")

// ErrInternal is what a client gets back for codes.Internal and Unknown.
var ErrInternal = errors.New("broker internal error")

// table maps each domain sentinel to its code and to the ErrorInfo reason
// that names it on the wire, so a client can tell apart two sentinels that
// share a code. Order matters only for an error that wraps two sentinels;
// the first match wins.
var table = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{ErrBudgetExceeded, codes.ResourceExhausted, "BUDGET_EXCEEDED"},
	{ErrNotOwner, codes.FailedPrecondition, "NOT_OWNER"},
	{ErrWrongState, codes.FailedPrecondition, "WRONG_STATE"},
	{ErrNotFound, codes.NotFound, "NOT_FOUND"},
	{ErrInvalid, codes.InvalidArgument, "INVALID"},
	{ErrConflict, codes.Aborted, "CONFLICT"},
	{ErrCorrupt, codes.DataLoss, "CORRUPT"},
	{context.Canceled, codes.Canceled, "CANCELED"},
	{context.DeadlineExceeded, codes.DeadlineExceeded, "DEADLINE_EXCEEDED"},
	{ErrUnavailable, codes.Unavailable, "UNAVAILABLE"},
	// A deposed leader's fenced write: transient for the caller, another
	// replica leads (or soon will).
	{ErrNotLeader, codes.Unavailable, "NOT_LEADER"},
}

// domain is the ErrorInfo domain of every error the broker describes.
const domain = "allot.dev"

// Code returns the gRPC code for err: the first sentinel of the table it
// wraps; for a wrapped etcd status, Unavailable, DeadlineExceeded and
// Canceled are kept; anything else is Internal.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	for _, row := range table {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			// etcd's own transient failures say the same to our client.
			return s.Code()
		}
	}
	return codes.Internal
}

// Status converts err into a gRPC status error. A status error passes
// through unchanged. A domain error carries an ErrorInfo naming its
// sentinel; a *BudgetError adds its figures as metadata.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	st := status.New(Code(err), err.Error())
	for _, row := range table {
		if !errors.Is(err, row.err) {
			continue
		}
		info := &errdetails.ErrorInfo{Reason: row.reason, Domain: domain}
		var be *BudgetError
		if errors.As(err, &be) {
			info.Metadata = map[string]string{
				"subnet_id": be.SubnetID,
				"limit":     strconv.FormatInt(be.Limit, 10),
				"use":       strconv.FormatInt(be.Use, 10),
				"requested": strconv.FormatInt(be.Requested, 10),
			}
		}
		if withInfo, derr := st.WithDetails(info); derr == nil {
			st = withInfo
		}
		break
	}
	return st.Err()
}

// Error is the inverse of Status, for clients: it returns an error whose
// text is the server's message and which errors.Is matches against the
// domain sentinel the server named (or, from a server that named none, the
// first sentinel of the code). A budget refusal comes back as a
// *BudgetError. The status stays reachable through status.FromError.
func Error(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if sentinel := fromInfo(st); sentinel != nil {
		return &Remote{st: st, sentinel: sentinel}
	}
	for _, row := range table {
		if row.code == st.Code() {
			return &Remote{st: st, sentinel: row.err}
		}
	}
	switch st.Code() {
	case codes.Internal, codes.Unknown:
		return &Remote{st: st, sentinel: ErrInternal}
	}
	return err
}

// Remote is an error the broker returned, decoded by Error.
type Remote struct {
	st       *status.Status
	sentinel error
}

// Error returns the server's message.
func (r *Remote) Error() string { return r.st.Message() }

// Unwrap returns the domain sentinel (or *BudgetError).
func (r *Remote) Unwrap() error { return r.sentinel }

// GRPCStatus keeps the original status visible to status.FromError.
func (r *Remote) GRPCStatus() *status.Status { return r.st }

// fromInfo returns the sentinel an ErrorInfo detail names, or a
// *BudgetError rebuilt from its metadata.
func fromInfo(st *status.Status) error {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetDomain() != domain {
			continue
		}
		for _, row := range table {
			if row.reason != info.GetReason() {
				continue
			}
			if row.err != ErrBudgetExceeded {
				return row.err
			}
			md := info.GetMetadata()
			num := func(k string) int64 {
				n, _ := strconv.ParseInt(md[k], 10, 64)
				return n
			}
			return &BudgetError{SubnetID: md["subnet_id"], Limit: num("limit"), Use: num("use"), Requested: num("requested")}
		}
	}
	return nil
}
