// Package ec2 is awssim's EC2 Query API server: it decodes what the
// aws-sdk-go-v2 ec2 client sends, throttles it with the account's token
// buckets, injects configured faults, carries the action out on the world
// and answers in EC2's XML. Every request gets an answer; a panic in a
// handler becomes an InternalError, never a crash.
package ec2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/allotnet/allot/awssim/ec2query"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
)

// Config wires a Server to the world it serves.
type Config struct {
	World   *world.World
	Limiter *throttle.Limiter
	// Seed makes fault draws reproducible.
	Seed   int64
	Logger *slog.Logger
}

// Server is an http.Handler for the EC2 Query API.
type Server struct {
	world    *world.World
	clock    simclock.Clock
	limiter  *throttle.Limiter
	faults   *faults
	counters *counters
	log      *slog.Logger
}

var _ http.Handler = (*Server)(nil)

// New returns a server; cfg.World and cfg.Limiter are required.
func New(cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		world:    cfg.World,
		clock:    cfg.World.Clock(),
		limiter:  cfg.Limiter,
		faults:   newFaults(cfg.Seed),
		counters: newCounters(),
		log:      log.With("component", "awssim-ec2"),
	}
}

// handler carries out one action: it reads every parameter it understands,
// calls req.CheckUnused, then acts.
type handler func(s *Server, req *ec2query.Request) (ec2query.Body, error)

// handlers maps every supported action to its handler.
var handlers = map[string]handler{
	"CreateNetworkInterface":          (*Server).createNetworkInterface,
	"DeleteNetworkInterface":          (*Server).deleteNetworkInterface,
	"AttachNetworkInterface":          (*Server).attachNetworkInterface,
	"DetachNetworkInterface":          (*Server).detachNetworkInterface,
	"AssignPrivateIpAddresses":        (*Server).assignPrivateIPAddresses,
	"UnassignPrivateIpAddresses":      (*Server).unassignPrivateIPAddresses,
	"ModifyNetworkInterfaceAttribute": (*Server).modifyNetworkInterfaceAttribute,
	"DescribeNetworkInterfaces":       (*Server).describeNetworkInterfaces,
	"DescribeInstances":               (*Server).describeInstances,
	"DescribeInstanceTypes":           (*Server).describeInstanceTypes,
	"DescribeSubnets":                 (*Server).describeSubnets,
	"DescribeVpcs":                    (*Server).describeVpcs,
	"DescribeSecurityGroups":          (*Server).describeSecurityGroups,
	"CreateTags":                      (*Server).createTags,
	"DeleteTags":                      (*Server).deleteTags,
}

// Actions returns the names of the supported actions.
func Actions() []string {
	out := make([]string, 0, len(handlers))
	for a := range handlers {
		out = append(out, a)
	}
	return out
}

// unknownAction is the counter key of requests whose action is not supported.
const unknownAction = "(unknown)"

// ServeHTTP answers one EC2 Query request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	action := unknownAction
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panic", "action", action, "panic", fmt.Sprint(p))
			s.counters.get(action).errors.Add(1)
			ec2query.WriteError(w, reqID, &ec2query.Error{Status: http.StatusInternalServerError,
				Code: ec2query.CodeInternalError, Message: "An internal error has occurred"})
		}
	}()
	body, err := s.serve(r, &action)
	if err != nil {
		e := toAPIError(err)
		if e.Code != ec2query.CodeRequestLimitExceeded {
			s.counters.get(action).errors.Add(1)
		}
		s.log.Debug("ec2 error", "action", action, "code", e.Code, "message", e.Message)
		ec2query.WriteError(w, reqID, e)
		return
	}
	if err := ec2query.WriteResponse(w, action, reqID, body); err != nil {
		s.log.Warn("write response", "action", action, "err", err)
	}
}

func (s *Server) serve(r *http.Request, action *string) (ec2query.Body, error) {
	req, err := ec2query.ReadRequest(r)
	if err != nil {
		s.counters.get(unknownAction).calls.Add(1)
		return nil, err
	}
	h, ok := handlers[req.Action]
	if !ok {
		s.counters.get(unknownAction).calls.Add(1)
		return nil, ec2query.Errorf(ec2query.CodeInvalidAction, "The action %s is not valid for this web service.", printable(req.Action))
	}
	*action = req.Action
	c := s.counters.get(req.Action)
	c.calls.Add(1)
	if !s.limiter.TakeAction(req.Action, narrowed(req)) {
		c.throttled.Add(1)
		return nil, &ec2query.Error{Status: http.StatusServiceUnavailable, Code: ec2query.CodeRequestLimitExceeded, Message: "Request limit exceeded."}
	}
	fault, fail := s.faults.draw(req.Action)
	if fault.Latency > 0 {
		if err := sleep(r.Context(), s.clock.Real(fault.Latency.D())); err != nil {
			return nil, err
		}
	}
	if fail {
		return nil, faultError(fault.ErrorCode)
	}
	dry, _, err := req.Params.Bool("DryRun")
	if err != nil {
		return nil, err
	}
	if dry {
		// Parameters are not validated on a dry run; EC2 would check them
		// and the caller's permissions.
		return nil, &ec2query.Error{Status: http.StatusPreconditionFailed, Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set."}
	}
	return h(s, req)
}

// printable shortens and sanitises a client-supplied string for a message.
func printable(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// narrowed reports whether a Describe request has a filter, IDs or
// pagination, which puts it in the cheaper throttling class.
func narrowed(req *ec2query.Request) bool {
	for _, p := range []string{"Filter", "MaxResults", "NextToken", "NetworkInterfaceId", "InstanceId", "SubnetId", "InstanceType", "VpcId", "GroupId"} {
		if req.Params.Has(p) {
			return true
		}
	}
	return false
}

func faultError(code string) *ec2query.Error {
	if code == "" {
		code = ec2query.CodeInternalError
	}
	status := http.StatusBadRequest
	switch code {
	case ec2query.CodeInternalError:
		status = http.StatusInternalServerError
	case "Unavailable", ec2query.CodeRequestLimitExceeded:
		status = http.StatusServiceUnavailable
	}
	return &ec2query.Error{Status: status, Code: code, Message: "Injected fault."}
}

// toAPIError maps any handler error to the EC2 error the client sees.
func toAPIError(err error) *ec2query.Error {
	var qe *ec2query.Error
	if errors.As(err, &qe) {
		return qe
	}
	var we *world.Error
	if errors.As(err, &we) {
		return &ec2query.Error{Status: http.StatusBadRequest, Code: we.Code, Message: we.Message}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &ec2query.Error{Status: http.StatusServiceUnavailable, Code: "Unavailable", Message: "The request was cancelled."}
	}
	return &ec2query.Error{Status: http.StatusInternalServerError, Code: ec2query.CodeInternalError, Message: "An internal error has occurred"}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Counters returns the per-action counters.
func (s *Server) Counters() map[string]ActionCounters { return s.counters.snapshot() }

// ResetCounters zeroes every counter.
func (s *Server) ResetCounters() { s.counters.reset() }

// Faults returns the current faults by action (AllActions for the default).
func (s *Server) Faults() map[string]Fault { return s.faults.get() }

// SetFaults replaces the faults.
func (s *Server) SetFaults(m map[string]Fault) { s.faults.set(m) }
