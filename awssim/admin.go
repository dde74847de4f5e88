package awssim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/simclock"
	"github.com/allotnet/allot/awssim/throttle"
	"github.com/allotnet/allot/awssim/world"
)

// FaultsState is the admin view of every switchable fault.
type FaultsState struct {
	// Actions by action name; "*" applies to actions without an entry.
	Actions map[string]Fault `json:"actions"`
	// ConsistencyWindow hides new ENIs from DescribeNetworkInterfaces.
	ConsistencyWindow *simclock.Duration `json:"consistencyWindow,omitempty"`
	// IMDSLag is how far IMDS lags EC2.
	IMDSLag *simclock.Duration `json:"imdsLag,omitempty"`
}

// AdminInstance is an instance as the admin API lists it.
type AdminInstance struct {
	ID               string            `json:"id"`
	Type             string            `json:"type"`
	AvailabilityZone string            `json:"availabilityZone"`
	SubnetID         string            `json:"subnetId"`
	PrivateIP        string            `json:"privateIp"`
	MAC              string            `json:"mac"`
	IMDSEndpoint     string            `json:"imdsEndpoint"`
	ENIs             []string          `json:"enis"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// AddInstancesRequest is the body of POST /v1/instances.
type AddInstancesRequest struct {
	// Subnet is a subnet ID or Name tag.
	Subnet string `json:"subnet"`
	Type   string `json:"type"`
	// Count launches this many (default 1).
	Count            int               `json:"count,omitempty"`
	PrivateIP        string            `json:"privateIp,omitempty"`
	SecurityGroupIDs []string          `json:"securityGroupIds,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// FragmentResult answers POST /v1/subnets/{id}/fragment: one address of
// every wholly free /28 block was taken (world.World.FragmentSubnet), so
// prefix requests in the subnet fail with InsufficientCidrBlocks.
type FragmentResult struct {
	Taken  int          `json:"taken"`
	Subnet world.Subnet `json:"subnet"`
}

// ThrottleState is the admin view of the token buckets.
type ThrottleState struct {
	Disabled bool                     `json:"disabled"`
	Buckets  map[string]throttle.Spec `json:"buckets"`
	// Tokens is what each bucket holds now, per-API buckets in use
	// included.
	Tokens map[string]float64 `json:"tokens,omitempty"`
	// Semantics is how buckets are keyed and refilled; a PUT with it set
	// switches the model (every bucket starts over full).
	Semantics *throttle.Semantics `json:"semantics,omitempty"`
	// Tenant is the fraction of every bucket another tool takes
	// (throttle.Limiter.SetTenant); a PUT with it set starts or stops that
	// tool. TenantTaken is what it has taken so far, by bucket.
	Tenant      *float64           `json:"tenant,omitempty"`
	TenantTaken map[string]float64 `json:"tenantTaken,omitempty"`
}

// adminHandler serves the admin API (JSON):
//
//	GET    /healthz
//	GET    /v1/counters            per-action {calls, throttled, errors}
//	POST   /v1/counters/reset
//	GET    /v1/instances           POST /v1/instances (AddInstancesRequest)
//	DELETE /v1/instances/{id}
//	GET    /v1/subnets             with exact available counts
//	POST   /v1/subnets/{id}/fragment  no free /28 left (FragmentResult)
//	GET    /v1/enis
//	GET    /v1/faults              PUT /v1/faults (FaultsState)
//	GET    /v1/throttle            PUT /v1/throttle (ThrottleState)
//	GET    /v1/identity-certificate PEM certificate verifying identity documents
func (s *Sim) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/counters", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Counters()) })
	mux.HandleFunc("POST /v1/counters/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetCounters()
		writeJSON(w, http.StatusOK, s.Counters())
	})
	mux.HandleFunc("GET /v1/instances", func(w http.ResponseWriter, _ *http.Request) {
		out := []AdminInstance{}
		for _, i := range s.world.Instances() {
			out = append(out, s.adminInstance(i))
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /v1/instances", s.adminAddInstances)
	mux.HandleFunc("DELETE /v1/instances/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := s.RemoveInstance(r.PathValue("id")); err != nil {
			writeError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /v1/identity-certificate", func(w http.ResponseWriter, _ *http.Request) {
		pem, err := s.IdentityCertificatePEM()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		w.Header().Set("Content-Type", "application/x-pem-file")
		_, _ = w.Write(pem)
	})
	mux.HandleFunc("GET /v1/subnets", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.world.Subnets()) })
	mux.HandleFunc("POST /v1/subnets/{id}/fragment", func(w http.ResponseWriter, r *http.Request) {
		taken, err := s.world.FragmentSubnet(r.PathValue("id"))
		if err != nil {
			writeError(w, err)
			return
		}
		sn, _ := s.world.Subnet(r.PathValue("id"))
		writeJSON(w, http.StatusOK, FragmentResult{Taken: taken, Subnet: sn})
	})
	mux.HandleFunc("GET /v1/enis", func(w http.ResponseWriter, _ *http.Request) {
		var out []world.NetworkInterface
		for _, i := range s.world.AllNetworkInterfaces() {
			out = append(out, *i)
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /v1/faults", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.faultsState()) })
	mux.HandleFunc("PUT /v1/faults", func(w http.ResponseWriter, r *http.Request) {
		var st FaultsState
		if err := readJSON(r, &st); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		for name, f := range st.Actions {
			if f.ErrorRate < 0 || f.ErrorRate > 1 || f.Latency < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("fault %s: errorRate must be in [0,1] and latency >= 0", name)})
				return
			}
		}
		s.SetFaults(st.Actions)
		if st.ConsistencyWindow != nil {
			s.world.SetConsistencyWindow(st.ConsistencyWindow.D())
		}
		if st.IMDSLag != nil {
			s.world.SetIMDSLag(st.IMDSLag.D())
		}
		writeJSON(w, http.StatusOK, s.faultsState())
	})
	mux.HandleFunc("GET /v1/throttle", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.throttleState()) })
	mux.HandleFunc("PUT /v1/throttle", func(w http.ResponseWriter, r *http.Request) {
		var st ThrottleState
		if err := readJSON(r, &st); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		if st.Tenant != nil && !(*st.Tenant >= 0 && *st.Tenant < 1) {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "tenant must be a fraction in [0, 1)"})
			return
		}
		s.limiter.SetDisabled(st.Disabled)
		for name, spec := range st.Buckets {
			if spec.Capacity < 1 || spec.Refill < 0 {
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("bucket %s: capacity >= 1 and refill >= 0 required", name)})
				return
			}
			s.limiter.SetSpec(name, spec)
		}
		if st.Semantics != nil {
			s.limiter.SetSemantics(*st.Semantics)
		}
		if st.Tenant != nil {
			s.limiter.SetTenant(*st.Tenant)
		}
		writeJSON(w, http.StatusOK, s.throttleState())
	})
	return mux
}

func (s *Sim) faultsState() FaultsState {
	cw := simclock.Duration(s.world.ConsistencyWindow())
	lag := simclock.Duration(s.world.IMDSLag())
	return FaultsState{Actions: s.Faults(), ConsistencyWindow: &cw, IMDSLag: &lag}
}

func (s *Sim) throttleState() ThrottleState {
	specs := s.limiter.Specs()
	sem, tenant := s.limiter.Semantics(), s.limiter.Tenant()
	st := ThrottleState{Disabled: s.limiter.Disabled(), Buckets: specs, Tokens: map[string]float64{},
		Semantics: &sem, Tenant: &tenant, TenantTaken: s.limiter.TenantTaken()}
	for _, name := range s.limiter.Buckets() {
		st.Tokens[name] = s.limiter.Tokens(name)
	}
	return st
}

func (s *Sim) adminAddInstances(w http.ResponseWriter, r *http.Request) {
	var req AddInstancesRequest
	if err := readJSON(r, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	subnetID, ok := scenario.SubnetID(s.world, req.Subnet)
	if !ok {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("subnet %q not found", req.Subnet)})
		return
	}
	n := max(req.Count, 1)
	if n > 1 && req.PrivateIP != "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "privateIp needs count <= 1"})
		return
	}
	out := []AdminInstance{}
	for range n {
		inst, err := s.AddInstance(world.InstanceSpec{
			Type: req.Type, SubnetID: subnetID, PrivateIP: req.PrivateIP, SecurityGroupIDs: req.SecurityGroupIDs, Tags: req.Tags,
		})
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, s.adminInstance(inst))
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Sim) adminInstance(i world.Instance) AdminInstance {
	url, _ := s.IMDSEndpoint(i.ID)
	a := AdminInstance{
		ID: i.ID, Type: i.Type, AvailabilityZone: i.AvailabilityZone, SubnetID: i.SubnetID,
		PrivateIP: i.PrivateIP, MAC: i.MAC, IMDSEndpoint: url, Tags: i.Tags, ENIs: []string{},
	}
	for _, e := range i.NetworkInterfaces {
		a.ENIs = append(a.ENIs, e.ID)
	}
	return a
}

func readJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode request body: %w", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	body := map[string]string{"error": err.Error()}
	var we *world.Error
	if errors.As(err, &we) {
		status = http.StatusBadRequest
		if we.Code == world.CodeInstanceNotFound {
			status = http.StatusNotFound
		}
		body["code"] = we.Code
	}
	writeJSON(w, status, body)
}
