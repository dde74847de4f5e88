package burst

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/allotnet/allot/agent/pool"
	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/world"
)

// admin is a client of awssim's admin API: the harness reads counters,
// buckets, instances and ENIs through it whether awssim runs in this
// process or in a child.
type admin struct {
	base string
	hc   *http.Client
}

func newAdmin(base string) *admin {
	return &admin{base: base, hc: &http.Client{Timeout: 60 * time.Second}}
}

func (a *admin) do(ctx context.Context, method, path string, out any) error {
	return a.doBody(ctx, method, path, nil, out)
}

func (a *admin) doBody(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("awssim admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("awssim admin %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("awssim admin %s %s: decode: %w", method, path, err)
	}
	return nil
}

// Counters returns calls, throttles and errors by action.
func (a *admin) Counters(ctx context.Context) (map[string]awssim.ActionCounters, error) {
	var out map[string]awssim.ActionCounters
	return out, a.do(ctx, http.MethodGet, "/v1/counters", &out)
}

// Calls returns the calls by action (throttled ones included) and how many
// were throttled in all.
func (a *admin) Calls(ctx context.Context) (map[string]int64, int64, error) {
	counters, err := a.Counters(ctx)
	if err != nil {
		return nil, 0, err
	}
	calls, throttled := map[string]int64{}, int64(0)
	for action, c := range counters {
		calls[action] = c.Calls
		throttled += c.Throttled
	}
	return calls, throttled, nil
}

// ResetCounters zeroes the counters.
func (a *admin) ResetCounters(ctx context.Context) error {
	return a.do(ctx, http.MethodPost, "/v1/counters/reset", nil)
}

// Throttle returns the buckets and what each holds now.
func (a *admin) Throttle(ctx context.Context) (awssim.ThrottleState, error) {
	var out awssim.ThrottleState
	return out, a.do(ctx, http.MethodGet, "/v1/throttle", &out)
}

// SetTenant starts (f > 0) or stops another tool taking fraction f of
// every bucket.
func (a *admin) SetTenant(ctx context.Context, f float64) error {
	b, err := json.Marshal(awssim.ThrottleState{Tenant: &f})
	if err != nil {
		return err
	}
	return a.doBody(ctx, http.MethodPut, "/v1/throttle", b, nil)
}

// Instances lists the instances with their IMDS endpoints.
func (a *admin) Instances(ctx context.Context) ([]awssim.AdminInstance, error) {
	var out []awssim.AdminInstance
	return out, a.do(ctx, http.MethodGet, "/v1/instances", &out)
}

// ENIs lists every network interface in the account.
func (a *admin) ENIs(ctx context.Context) ([]world.NetworkInterface, error) {
	var out []world.NetworkInterface
	return out, a.do(ctx, http.MethodGet, "/v1/enis", &out)
}

// Subnets lists the subnets with their free address counts.
func (a *admin) Subnets(ctx context.Context) ([]world.Subnet, error) {
	var out []world.Subnet
	return out, a.do(ctx, http.MethodGet, "/v1/subnets", &out)
}

// catalogLimits returns the stand-in EC2's ENI limits of an instance type,
// for the fleets' own bookkeeping before awssim runs; the agents learn
// theirs from the broker, which reads them with DescribeInstanceTypes.
func catalogLimits(instanceType string) (pool.Limits, bool) {
	t, ok := world.DefaultInstanceTypes()[instanceType]
	return pool.Limits{MaxENIs: t.MaxENIs, IPv4PerENI: t.IPv4PerENI}, ok
}
