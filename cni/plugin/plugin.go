package plugin

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/delqueue"
	"github.com/allotnet/allot/cni/plugin/otlp"
	"github.com/allotnet/allot/internal/logfmt"
)

// Versions are the CNI spec versions the plugin speaks. CHECK needs 0.4.0,
// GC and STATUS need 1.1.0.
var Versions = cnispec.Versions{"0.4.0", "1.0.0", "1.1.0"}

// PodGateway is the pod's default gateway: a link-local address the host
// veth answers through a permanent ARP entry, the same on every node.
var PodGateway = netip.MustParseAddr("169.254.1.1")

// Plugin runs one CNI command. Stdout receives the result; Stderr, the
// runtime's, gets what an operator should know about (a queued DEL) in the
// netconf's logFormat, unless Log is set.
type Plugin struct {
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
	// Now is the clock for queue times.
	Now func() time.Time
	// Tracer makes a span of each command, parent of the agent's; its
	// trace context goes to the agent with the call. Nil makes none (and
	// sends none). FlushSpans hands its spans to the agent.
	Tracer *otlp.Tracer

	// socket is the agent's socket the command called, and agentDown
	// whether it found no agent there, for FlushSpans.
	socket    string
	agentDown bool
}

// Funcs returns the commands for cnispec.Main.
func (p *Plugin) Funcs() cnispec.Funcs {
	return cnispec.Funcs{Add: p.Add, Del: p.Del, Check: p.Check, GC: p.GC, Status: p.Status}
}

// command is what every per-attachment command starts with: the parsed
// netconf, CNI_ARGS and the request for the agent.
type command struct {
	conf *NetConf
	req  cniwire.CNIRequest
}

func (p *Plugin) prepare(args *cnispec.CmdArgs) (*command, error) {
	conf, err := parseNetConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	k8s, err := parseArgs(args.Args)
	if err != nil {
		return nil, err
	}
	return &command{
		conf: conf,
		req: cniwire.CNIRequest{
			Attachment:   cniwire.Attachment{Network: conf.Name, ContainerID: args.ContainerID, IfName: args.IfName},
			NetNS:        args.Netns,
			CNIVersion:   conf.CNIVersion,
			PodNamespace: k8s.podNamespace,
			PodName:      k8s.podName,
		},
	}, nil
}

// Add asks the agent for an address and the pod's network, and prints the
// result in the runtime's spec version.
func (p *Plugin) Add(args *cnispec.CmdArgs) (err error) {
	span, end := p.span("ADD", args)
	defer func() { end(err) }()
	c, err := p.prepare(args)
	if err != nil {
		return err
	}
	if w := TimeoutWarning(c.conf.timeout); w != "" {
		p.log(c.conf).Warn("ADD timeout too long for the runtime", "timeout", c.conf.timeout.String(), "why", w)
	}
	body, err := p.call(deadline(c.conf.timeout), span, c.conf.AgentSocket, cniwire.MethodAdd, c.req.Marshal())
	if err != nil {
		return agentError("ADD", err)
	}
	res, err := cniwire.UnmarshalAddResult(body)
	if err != nil {
		return cnispec.NewError(cnispec.ErrInternal, "allot agent returned a malformed result", err.Error())
	}
	result, err := buildResult(res, args.IfName, args.Netns, c.conf.DNS)
	if err != nil {
		return cnispec.NewError(cnispec.ErrInternal, "allot agent returned a malformed result", err.Error())
	}
	if _, err := p.Stdout.Write(result.Append(nil, c.conf.CNIVersion)); err != nil {
		return cnispec.NewError(cnispec.ErrIOFailure, "cannot write the result", err.Error())
	}
	return nil
}

// buildResult makes the CNI result for what the agent set up: the host
// veth, the pod interface, its /32 and a default route via the gateway.
func buildResult(res cniwire.AddResult, ifName, netns string, dns cnispec.DNS) (*cnispec.Result, error) {
	addr, err := netip.ParsePrefix(res.Address)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", res.Address, err)
	}
	if !addr.Addr().Is4() || addr.Bits() != 32 {
		return nil, fmt.Errorf("address %q is not an IPv4 /32", res.Address)
	}
	gw := PodGateway
	if g := res.Gateway; g != "" {
		if gw, err = netip.ParseAddr(g); err != nil {
			return nil, fmt.Errorf("gateway %q: %w", g, err)
		}
	}
	return &cnispec.Result{
		Interfaces: []cnispec.Interface{
			{Name: res.HostIfName, Mac: res.HostMAC},
			{Name: ifName, Mac: res.ContainerMAC, Sandbox: netns},
		},
		IPs:    []cnispec.IPConfig{{Interface: 1, Address: addr, Gateway: gw}},
		Routes: []cnispec.Route{{Dst: netip.PrefixFrom(netip.IPv4Unspecified(), 0), GW: gw}},
		DNS:    dns,
	}, nil
}

// Del asks the agent to tear the attachment down, within DelTimeout. When
// the agent cannot be reached or doesn't answer in time, the DEL is queued
// durably for the agent to replay and reported as done: kubelet must not be
// blocked by a down agent, and the queue makes sure the address is still
// released. Without a queue (delQueueDir "") such a DEL fails with "try
// again later": answering 0 for a DEL nothing will apply would leak the
// address and leave the pod's network in place.
func (p *Plugin) Del(args *cnispec.CmdArgs) (err error) {
	span, end := p.span("DEL", args)
	defer func() { end(err) }()
	c, err := p.prepare(args)
	if err != nil {
		return err
	}
	// A prevResult that can't be parsed must not block a DEL; the agent
	// has its own record of the attachment.
	if prev, err := c.conf.parsePrevResult(); err == nil {
		c.req.PrevResult = prev
	}
	_, err = p.call(deadline(c.conf.bound(DelTimeout)), span, c.conf.AgentSocket, cniwire.MethodDel, c.req.Marshal())
	if err == nil {
		return nil
	}
	if !agentUnreachable(err) {
		return agentError("DEL", err)
	}
	if c.conf.delQueue == "" {
		return cnispec.NewError(cnispec.ErrTryAgainLater, "allot agent unreachable and the network config has no DEL queue (delQueueDir is \"\")",
			fmt.Sprintf("agent: %v; the runtime must retry the DEL", err))
	}
	return p.queueDel(c, err)
}

// queueDel writes the DEL the agent could not take (agentErr) to the queue.
func (p *Plugin) queueDel(c *command, agentErr error) error {
	e := delqueue.Entry{
		Network:      c.req.Attachment.Network,
		ContainerID:  c.req.Attachment.ContainerID,
		IfName:       c.req.Attachment.IfName,
		NetNS:        c.req.NetNS,
		CNIVersion:   c.req.CNIVersion,
		PodNamespace: c.req.PodNamespace,
		PodName:      c.req.PodName,
		QueuedAt:     p.now(),
	}
	path, qErr := delqueue.Write(c.conf.delQueue, e)
	if qErr != nil {
		// Not queued: fail, so the runtime retries rather than the address
		// leaking silently.
		return cnispec.NewError(cnispec.ErrTryAgainLater, "allot agent unreachable and the DEL could not be queued",
			fmt.Sprintf("agent: %v; queue: %v", agentErr, qErr))
	}
	p.log(c.conf).Warn("allot agent unreachable; DEL queued for replay",
		"attachment", e.Network+"/"+e.ContainerID+"/"+e.IfName, "path", path, "err", agentErr)
	return nil
}

// Check asks the agent to verify the attachment against its record and the
// runtime's prevResult.
func (p *Plugin) Check(args *cnispec.CmdArgs) (err error) {
	span, end := p.span("CHECK", args)
	defer func() { end(err) }()
	c, err := p.prepare(args)
	if err != nil {
		return err
	}
	prev, err := c.conf.parsePrevResult()
	if err != nil {
		return err
	}
	if prev == nil {
		return cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "CHECK needs a prevResult", "the runtime must pass the ADD result as prevResult")
	}
	c.req.PrevResult = prev
	if _, err := p.call(deadline(c.conf.timeout), span, c.conf.AgentSocket, cniwire.MethodCheck, c.req.Marshal()); err != nil {
		return agentError("CHECK", err)
	}
	return nil
}

// GC sends the runtime's valid attachments to the agent, which removes the
// attachments of this network that are not among them.
func (p *Plugin) GC(args *cnispec.CmdArgs) (err error) {
	span, end := p.span("GC", args)
	defer func() { end(err) }()
	conf, err := parseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	valid, err := validAttachments(args.StdinData)
	if err != nil {
		return err
	}
	req := cniwire.GCRequest{Network: conf.Name, Valid: make([]cniwire.Attachment, 0, len(valid))}
	for _, a := range valid {
		req.Valid = append(req.Valid, cniwire.Attachment{Network: conf.Name, ContainerID: a.ContainerID, IfName: a.IfName})
	}
	if _, err := p.call(deadline(conf.timeout), span, conf.AgentSocket, cniwire.MethodGC, req.Marshal()); err != nil {
		return agentError("GC", err)
	}
	return nil
}

// Status reports whether the agent can serve ADDs, within StatusTimeout:
// 50 when it can't be reached, doesn't answer in time, or is up but has no
// address and can't get one.
func (p *Plugin) Status(args *cnispec.CmdArgs) (err error) {
	span, end := p.span("STATUS", args)
	defer func() { end(err) }()
	conf, err := parseNetConf(args.StdinData)
	if err != nil {
		return err
	}
	if _, err := p.call(deadline(conf.bound(StatusTimeout)), span, conf.AgentSocket, cniwire.MethodStatus, nil); err != nil {
		return agentError("STATUS", err)
	}
	return nil
}

// deadline is when a call bounded by d, starting now, must be over. Calls
// take a time rather than a context: a context with a deadline sets a
// runtime timer, and a Go process's first timer starts its network poller
// (an epoll instance and a thread waiting in it), start-up cost that every
// exec of the plugin would pay for nothing.
func deadline(d time.Duration) time.Time { return time.Now().Add(d) }

func (p *Plugin) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Plugin) log(conf *NetConf) *slog.Logger {
	switch {
	case p.Log != nil:
		return p.Log
	case p.Stderr != nil:
		return logfmt.New(p.Stderr, logfmt.Options{Level: slog.LevelInfo, Format: conf.LogFormat})
	}
	return slog.New(slog.DiscardHandler)
}
