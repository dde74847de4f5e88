package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/agent/introspect"
	"github.com/allotnet/allot/internal/freeport"
)

// agentHeartbeat is how often agents tell the broker they live; the broker
// counts a node dead after brokerNodeTTL without one.
const agentHeartbeat = time.Second

// Agent is allot-agent running as a child process for one node. It runs in
// the root network namespace, where awssim's IMDS and the broker listen on
// loopback, and configures the node's namespace through netlink handles
// bound to it (--node-netns). On a real node it runs in the host namespace
// and reaches IMDS at 169.254.169.254.
type Agent struct {
	// Socket is the CNI socket the node's conflist points at; DelQueue
	// the plugin's DEL queue directory; Checkpoint the allocation
	// checkpoint; Introspect the 127.0.0.1 address of /v1/pods and friends;
	// Metrics the address serving /metrics alone, as a scraper would use.
	Socket, DelQueue, Checkpoint, Introspect, Metrics string

	proc *process
}

type agentParams struct {
	name, imds, broker, nodeNetNS, mode string
	warm                                WarmTargets
	cooldown                            time.Duration
	certs                               *pki
	env, extra                          []string
}

func newAgent(bins Binaries, r *run, p agentParams) (*Agent, error) {
	dir := filepath.Join(r.dir, "nodes", p.name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	introAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	a := &Agent{
		Metrics:    metricsAddr,
		Socket:     filepath.Join(dir, "cni.sock"),
		DelQueue:   filepath.Join(dir, "del-queue"),
		Checkpoint: filepath.Join(dir, "checkpoint.json"),
		Introspect: introAddr,
	}
	args := []string{
		"--imds-endpoint=" + p.imds,
		"--broker=" + p.broker,
		"--node-netns=" + p.nodeNetNS,
		"--checkpoint=" + a.Checkpoint,
		"--socket=" + a.Socket,
		"--del-queue-dir=" + a.DelQueue,
		"--introspect-addr=" + a.Introspect,
		// The nodes share this host, so they share one repair token.
		"--repair-token-file=" + filepath.Join(r.dir, repairTokenName),
		"--metrics-addr=" + a.Metrics,
		"--mode=" + p.mode,
		"--cooldown=" + max(p.cooldown, 0).String(),
		"--heartbeat-interval=" + agentHeartbeat.String(),
		"--log-level=debug",
	}
	args = append(args, p.certs.agentArgs(dir)...)
	for _, f := range []struct {
		flag string
		v    int
	}{
		{"--warm-ip-target", p.warm.WarmIPs}, {"--minimum-ip-target", p.warm.MinimumIPs},
		{"--warm-eni-target", p.warm.WarmENIs}, {"--warm-prefix-target", p.warm.WarmPrefixes},
	} {
		if f.v > 0 {
			args = append(args, f.flag+"="+strconv.Itoa(f.v))
		}
	}
	args = append(args, p.extra...)
	a.proc = newProcess("agent-"+p.name, bins.Agent, args, filepath.Join(dir, "agent.log"), r.pidDir())
	a.proc.env = p.env
	return a, nil
}

// Start runs the agent; WaitReady waits until it serves.
func (a *Agent) Start() error { return a.proc.start() }

// Stop ends the agent with SIGTERM (graceful). The agent lets ADDs still
// waiting for capacity finish (up to its max ADD wait, then 5 s more)
// before it exits, so it gets that long before SIGKILL; an idle agent
// exits at once.
func (a *Agent) Stop() error { return a.proc.stop(daemon.DefaultMaxAddWait + 10*time.Second) }

// Pid is the agent process's id, or 0 when it does not run.
func (a *Agent) Pid() int { return a.proc.pid() }

// Kill ends the agent with SIGKILL: none of its shutdown code runs.
func (a *Agent) Kill() error { return a.proc.stop(0) }

// Running reports whether the agent process is alive.
func (a *Agent) Running() bool { return a.proc.running() }

// LogTail returns the last n lines of the agent's log.
func (a *Agent) LogTail(n int) string { return a.proc.logTail(n) }

// WaitReady waits until /healthz says the agent restored its state and
// serves CNI.
func (a *Agent) WaitReady(ctx context.Context) error {
	var last error
	for {
		if st := a.proc.exitState(); st != nil {
			return fmt.Errorf("allot-agent exited (%v):\n%s", st, a.proc.logTail(30))
		}
		var h introspect.Health
		err := a.get(ctx, "/healthz", &h)
		if err == nil && h.Ready {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("not ready: %s", h.Detail)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("allot-agent not ready (last: %v): %w\n%s", last, ctx.Err(), a.proc.logTail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Pods returns the agent's /v1/pods.
func (a *Agent) Pods(ctx context.Context) ([]introspect.Pod, error) {
	var out []introspect.Pod
	return out, a.get(ctx, "/v1/pods", &out)
}

// ENIs returns the agent's /v1/enis.
func (a *Agent) ENIs(ctx context.Context) ([]introspect.ENI, error) {
	var out []introspect.ENI
	return out, a.get(ctx, "/v1/enis", &out)
}

// get fetches an introspection path and decodes its JSON; /healthz answers
// 503 with a body while not ready, which is decoded too.
func (a *Agent) get(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.Introspect+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}
