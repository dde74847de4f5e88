package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     codes.Code
		sentinel error
	}{
		{fmt.Errorf("get node i-1: %w", ErrNotFound), codes.NotFound, ErrNotFound},
		{fmt.Errorf("bad: %w", ErrInvalid), codes.InvalidArgument, ErrInvalid},
		{fmt.Errorf("release r1 belongs to i-2: %w", ErrNotOwner), codes.FailedPrecondition, ErrNotOwner},
		{fmt.Errorf("release r1 is done: %w", ErrWrongState), codes.FailedPrecondition, ErrWrongState},
		{fmt.Errorf("put: %w", ErrConflict), codes.Aborted, ErrConflict},
		{fmt.Errorf("key /x: %w", ErrCorrupt), codes.DataLoss, ErrCorrupt},
		{fmt.Errorf("list: %w", context.Canceled), codes.Canceled, context.Canceled},
		{fmt.Errorf("list: %w", context.DeadlineExceeded), codes.DeadlineExceeded, context.DeadlineExceeded},
		{fmt.Errorf("BeginIntent: election key gone: %w", ErrNotLeader), codes.Unavailable, ErrNotLeader},
		{errors.New("boom"), codes.Internal, ErrInternal},
	} {
		st := Status(tc.err)
		if got := status.Code(st); got != tc.code {
			t.Errorf("%v: code %v, want %v", tc.err, got, tc.code)
		}
		back := Error(st)
		if tc.sentinel != ErrNotOwner && errors.Is(back, ErrNotOwner) {
			t.Errorf("%v: client error also matches ErrNotOwner", tc.err)
		}
		if !errors.Is(back, tc.sentinel) {
			t.Errorf("%v: client error %v does not match %v", tc.err, back, tc.sentinel)
		}
		if back.Error() != tc.err.Error() {
			t.Errorf("client message %q, want %q", back.Error(), tc.err.Error())
		}
		if status.Code(back) != tc.code {
			t.Errorf("%v: status lost on the client side", tc.err)
		}
	}
}

func TestBudgetErrorKeepsFigures(t *testing.T) {
	in := fmt.Errorf("reserve: %w", &BudgetError{SubnetID: "subnet-0123456789abcdef0", Limit: 200, Use: 195, Requested: 15})
	st := Status(in)
	if status.Code(st) != codes.ResourceExhausted {
		t.Fatalf("code %v", status.Code(st))
	}
	back := Error(st)
	var be *BudgetError
	if !errors.As(back, &be) {
		t.Fatalf("%v is not a *BudgetError", back)
	}
	if be.SubnetID != "subnet-0123456789abcdef0" || be.Limit != 200 || be.Use != 195 || be.Requested != 15 {
		t.Fatalf("figures %+v", be)
	}
	if !errors.Is(back, ErrBudgetExceeded) {
		t.Fatal("not ErrBudgetExceeded")
	}
	if back.Error() != in.Error() {
		t.Fatalf("message %q", back.Error())
	}
}

func TestStatusPassesThrough(t *testing.T) {
	in := status.Error(codes.InvalidArgument, "instance_id: required")
	if Status(in) != in {
		t.Fatal("status error was rewritten")
	}
	if Error(status.Error(codes.Unauthenticated, "x")).Error() == "" {
		t.Fatal("unmapped code lost its message")
	}
	if Status(nil) != nil || Error(nil) != nil {
		t.Fatal("nil not preserved")
	}
}
