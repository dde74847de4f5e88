package cniserver

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Server implements allotv1.CNIServiceServer on top of a Backend.
type Server struct {
	allotv1.UnimplementedCNIServiceServer
	backend Backend
	log     *slog.Logger
	spans   SpanSink // the plugin's spans go there; nil drops them
}

var _ allotv1.CNIServiceServer = (*Server)(nil)

// New returns a Server that delegates to b.
func New(b Backend, log *slog.Logger) *Server {
	if log == nil {
		log = slog.Default()
	}
	return &Server{backend: b, log: log}
}

// Register adds the service to g, so the agent can serve it with its own
// interceptors (metrics, tracing) on the listener from Listen.
func (s *Server) Register(g grpc.ServiceRegistrar) {
	allotv1.RegisterCNIServiceServer(g, s)
}

// Add implements CNIService.Add.
func (s *Server) Add(ctx context.Context, in *allotv1.CNIRequest) (*allotv1.CNIAddResult, error) {
	req, err := requestFromProto("add", in)
	if err != nil {
		return nil, s.fail("add", req.Attachment, err)
	}
	res, err := s.backend.Add(ctx, req)
	if err != nil {
		return nil, s.fail("add", req.Attachment, err)
	}
	if !res.Address.IsValid() || !res.Address.Addr().Is4() || res.Address.Bits() != 32 {
		return nil, s.fail("add", req.Attachment, fmt.Errorf("backend returned address %q, want an IPv4 /32", res.Address))
	}
	out := &allotv1.CNIAddResult{
		Address:      res.Address.String(),
		HostIfname:   res.HostIfName,
		HostMac:      res.HostMAC,
		ContainerMac: res.ContainerMAC,
		EniId:        res.ENIID,
	}
	if res.Gateway.IsValid() {
		out.Gateway = res.Gateway.String()
	}
	return out, nil
}

// Del implements CNIService.Del.
func (s *Server) Del(ctx context.Context, in *allotv1.CNIRequest) (*allotv1.CNIDelResult, error) {
	req, err := requestFromProto("del", in)
	if err != nil {
		return nil, s.fail("del", req.Attachment, err)
	}
	if err := s.backend.Del(ctx, req); err != nil {
		return nil, s.fail("del", req.Attachment, err)
	}
	return &allotv1.CNIDelResult{}, nil
}

// Check implements CNIService.Check.
func (s *Server) Check(ctx context.Context, in *allotv1.CNIRequest) (*allotv1.CNICheckResult, error) {
	req, err := requestFromProto("check", in)
	if err != nil {
		return nil, s.fail("check", req.Attachment, err)
	}
	if err := s.backend.Check(ctx, req); err != nil {
		return nil, s.fail("check", req.Attachment, err)
	}
	return &allotv1.CNICheckResult{}, nil
}

// GC implements CNIService.GC.
func (s *Server) GC(ctx context.Context, in *allotv1.CNIGCRequest) (*allotv1.CNIGCResult, error) {
	if err := in.Validate(); err != nil {
		return nil, toStatus(fmt.Errorf("%w: gc: %v", ErrInvalidRequest, err))
	}
	req := GCRequest{Network: in.GetNetwork(), Valid: make([]Attachment, 0, len(in.GetValid()))}
	for _, v := range in.GetValid() {
		a := attachmentFromProto(v)
		a.Network = req.Network // Validate allowed only this one, or none
		req.Valid = append(req.Valid, a)
	}
	removed, err := s.backend.GC(ctx, req)
	if err != nil {
		s.log.Warn("cni gc failed", "network", req.Network, "valid", len(req.Valid), "err", err)
		return nil, toStatus(err)
	}
	out := &allotv1.CNIGCResult{Removed: make([]*allotv1.Attachment, 0, len(removed))}
	for _, a := range removed {
		out.Removed = append(out.Removed, attachmentToProto(a))
	}
	s.log.Info("cni gc", "network", req.Network, "valid", len(req.Valid), "removed", len(removed))
	return out, nil
}

// Status implements CNIService.Status.
func (s *Server) Status(ctx context.Context, _ *allotv1.CNIStatusRequest) (*allotv1.CNIStatusResult, error) {
	if err := s.backend.Status(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &allotv1.CNIStatusResult{}, nil
}

// fail logs a failed call and returns it as a gRPC status.
func (s *Server) fail(verb string, a Attachment, err error) error {
	s.log.Warn("cni "+verb+" failed", "attachment", a.String(), "code", Code(err).String(), "err", err)
	return toStatus(err)
}

// requestFromProto is the one check of a request from the plugin (or, for a
// DEL, from the plugin's queue): the key by CNI's rules, and the netns path
// that ADD and CHECK need. It then converts the request, once, into what
// the backend takes.
func requestFromProto(verb string, in *allotv1.CNIRequest) (Request, error) {
	req := Request{
		Attachment:   attachmentFromProto(in.GetAttachment()),
		NetNS:        in.GetNetns(),
		CNIVersion:   in.GetCniVersion(),
		PodNamespace: in.GetPodNamespace(),
		PodName:      in.GetPodName(),
		PrevResult:   in.GetPrevResult(),
	}
	if err := in.Validate(); err != nil {
		return req, fmt.Errorf("%w: %s: %v", ErrInvalidRequest, verb, err)
	}
	if req.NetNS == "" && verb != "del" {
		return req, fmt.Errorf("%w: %s has no netns path", ErrInvalidRequest, verb)
	}
	return req, nil
}

func attachmentFromProto(a *allotv1.Attachment) Attachment {
	return Attachment{Network: a.GetNetwork(), ContainerID: a.GetContainerId(), IfName: a.GetIfname()}
}

func attachmentToProto(a Attachment) *allotv1.Attachment {
	return &allotv1.Attachment{Network: a.Network, ContainerId: a.ContainerID, Ifname: a.IfName}
}
