// Package introspect serves the agent's node-local introspection over HTTP
// on a loopback address: /v1/enis and /v1/pods (JSON, the views operators
// know from aws-vpc-cni), /v1/check (records against host devices),
// /v1/logs (the latest log records), /healthz, /metrics (OpenTelemetry
// instruments through a Prometheus exporter), and POST /v1/repair (host
// devices made to match the records; it needs the repair token, token.go).
// Metrics alone can also be served on the node's address for in-cluster
// scraping (internal/telemetry.Listen).
package introspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/telemetry"
)

// ENI is one interface of the node's pool.
type ENI struct {
	ID          string    `json:"id"`
	MAC         string    `json:"mac"`
	DeviceIndex int       `json:"deviceIndex"`
	Primary     bool      `json:"primary,omitempty"`
	SubnetID    string    `json:"subnetID,omitempty"`
	SubnetCIDR  string    `json:"subnetCIDR,omitempty"`
	PrimaryIP   string    `json:"primaryIP,omitempty"`
	Addresses   []Address `json:"addresses"`
}

// Address is one pool address and who holds it.
type Address struct {
	Addr   string `json:"addr"`
	Prefix string `json:"prefix,omitempty"`
	// State is free, cooling, assigned or releasing.
	State     string    `json:"state"`
	CoolUntil time.Time `json:"coolUntil,omitzero"`
	ReleaseID string    `json:"releaseID,omitempty"`
	// Attachment is network/containerID/ifname of the holder.
	Attachment string `json:"attachment,omitempty"`
}

// Pod is one CNI attachment holding an address.
type Pod struct {
	Network      string    `json:"network"`
	ContainerID  string    `json:"containerID"`
	IfName       string    `json:"ifname"`
	Addr         string    `json:"addr"`
	ENIID        string    `json:"eniID"`
	HostVeth     string    `json:"hostVeth,omitempty"`
	Netns        string    `json:"netns,omitempty"`
	PodNamespace string    `json:"podNamespace,omitempty"`
	PodName      string    `json:"podName,omitempty"`
	Created      time.Time `json:"created"`
}

// Health is the agent's readiness and its broker link.
type Health struct {
	// Ready is true once the agent restored its state and serves CNI.
	Ready           bool   `json:"ready"`
	BrokerConnected bool   `json:"brokerConnected"`
	BrokerError     string `json:"brokerError,omitempty"`
	// Detail says why the agent is not ready.
	Detail string `json:"detail,omitempty"`
}

// Finding is one disagreement between the agent's records and the host's
// devices (the node's half of `allotctl check`).
type Finding struct {
	// Class is pod-without-devices, pod-netns-gone or devices-without-pod.
	Class      string `json:"class"`
	Attachment string `json:"attachment,omitempty"`
	Addr       string `json:"addr,omitempty"`
	HostVeth   string `json:"hostVeth,omitempty"`
	Detail     string `json:"detail"`
}

// CheckReport is what GET /v1/check answers: it compares, it changes
// nothing.
type CheckReport struct {
	// Pods is how many attachments the agent records; HostVeths how many
	// of our veths the host has.
	Pods      int       `json:"pods"`
	HostVeths int       `json:"hostVeths"`
	Findings  []Finding `json:"findings"`
	// Error says why the comparison could not be made.
	Error string `json:"error,omitempty"`
}

// Source is what introspection reads; the agent implements it.
type Source interface {
	ENIs() []ENI
	Pods() []Pod
	Health() Health
	Check() CheckReport
	// Logs are the latest log records, JSON lines; nil when none are kept.
	Logs() []byte
	// About is the agent's version, node and configuration.
	About() About
	// RepairHost restores the missing host devices of recorded pods and
	// removes the devices no record accounts for; it frees no address.
	RepairHost() RepairReport
}

// RepairReport is what RepairHost did.
type RepairReport struct {
	// Restored are the attachments whose missing host pieces were set up
	// again; Removed the stray links, rules and routes deleted.
	Restored []string `json:"restored"`
	Removed  int      `json:"removed"`
	Error    string   `json:"error,omitempty"`
}

// About is what a support bundle needs to know of the agent beside its
// state: which build, on which node, configured how. The configuration
// holds no secret (the broker credentials are files the agent reads, not
// part of it).
type About struct {
	Build            buildinfo.Info `json:"build"`
	InstanceID       string         `json:"instanceID,omitempty"`
	InstanceType     string         `json:"instanceType,omitempty"`
	AvailabilityZone string         `json:"availabilityZone,omitempty"`
	NodeName         string         `json:"nodeName,omitempty"`
	Config           any            `json:"config"`
}

// Server is the introspection HTTP server.
type Server struct {
	srv *http.Server
	lis net.Listener
	log *slog.Logger
}

// Listen binds addr, which must be a loopback address: what it serves
// describes every pod on the node and is meant for the node's operator only
// (metrics, which name no pod, may also be served elsewhere).
// metrics may be nil (no /metrics). repairToken guards POST /v1/repair
// (LoadOrCreateRepairToken); empty turns the route off.
func Listen(addr string, src Source, metrics *telemetry.Metrics, repairToken string, log *slog.Logger) (*Server, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("introspection listener: %w", err)
	}
	return &Server{
		srv: &http.Server{Handler: Handler(src, metrics, repairToken), ReadHeaderTimeout: 5 * time.Second},
		lis: lis, log: log,
	}, nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("introspection address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("introspection address %q must be on loopback (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Serve serves until Shutdown.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve introspection: %w", err)
	}
	return nil
}

// Shutdown stops serving, letting requests in flight finish until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Handler returns the introspection routes; metrics may be nil, and an
// empty repairToken turns POST /v1/repair off.
func Handler(src Source, metrics *telemetry.Metrics, repairToken string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/enis", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.ENIs())
	})
	mux.HandleFunc("GET /v1/pods", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.Pods())
	})
	mux.HandleFunc("GET /v1/check", func(w http.ResponseWriter, _ *http.Request) {
		rep := src.Check()
		writeJSON(w, okOr(rep.Error == "", http.StatusServiceUnavailable), rep)
	})
	mux.HandleFunc("GET /v1/about", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, src.About())
	})
	// The one route that changes anything, and only the host's devices
	// (to match the agent's own records): loopback, and the caller must
	// show the repair token only root on the node can read.
	mux.HandleFunc("POST /v1/repair", func(w http.ResponseWriter, r *http.Request) {
		if !repairAllowed(w, r, repairToken) {
			return
		}
		rep := src.RepairHost()
		writeJSON(w, okOr(rep.Error == "", http.StatusInternalServerError), rep)
	})
	mux.HandleFunc("GET /v1/logs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, _ = w.Write(src.Logs())
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		h := src.Health()
		writeJSON(w, okOr(h.Ready, http.StatusServiceUnavailable), h)
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics.Handler())
	}
	return mux
}

// okOr is 200 when ok, else failCode.
func okOr(ok bool, failCode int) int {
	if ok {
		return http.StatusOK
	}
	return failCode
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
