package burst

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// child is a running child process of the harness (the broker or awssim).
// It lives as long as its stdin is open: closing it is the stop signal, and
// if the harness dies the child sees EOF and exits too.
type child struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	hello childHello
	done  chan error
}

// spawnChild starts role and waits for its hello line.
func spawnChild(ctx context.Context, sp Spawner, role string, args []string, stderr io.Writer) (*child, error) {
	cmd := sp(role, args)
	// Without a writer for its logs the child's stderr is /dev/null (an
	// unset cmd.Stderr), not a pipe this process copies to io.Discard: a
	// harness running thousands of agents on a busy machine drains such a
	// pipe late, and the child's writes wait for it.
	if stderr != nil {
		cmd.Stderr = stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", role, err)
	}
	c := &child{role: role, cmd: cmd, stdin: stdin, done: make(chan error, 1)}
	hello := make(chan error, 1)
	go func() {
		br := bufio.NewReader(stdout)
		line, err := br.ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &c.hello)
		}
		hello <- err
		_, _ = io.Copy(io.Discard, br)
		c.done <- cmd.Wait()
	}()
	select {
	case err := <-hello:
		if err != nil {
			c.stop()
			return nil, fmt.Errorf("%s did not start: %w", role, err)
		}
	case <-time.After(2 * time.Minute):
		c.stop()
		return nil, fmt.Errorf("%s did not start within 2m", role)
	case <-ctx.Done():
		c.stop()
		return nil, ctx.Err()
	}
	return c, nil
}

// stop closes the child's stdin and waits for it to exit, killing it if
// it takes too long.
func (c *child) stop() {
	_ = c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// cloudHandle is a running awssim.
type cloudHandle struct {
	ec2   string
	admin *admin
	// pid is the child's, 0 when in this process.
	pid  int
	stop func()
}

func startCloud(ctx context.Context, cfg Config, cc CloudConfig) (*cloudHandle, error) {
	if cfg.Spawn == nil {
		cc.Logger = cfg.Logger
		sim, err := StartCloud(ctx, cc)
		if err != nil {
			return nil, err
		}
		return &cloudHandle{ec2: sim.EC2Endpoint(), admin: newAdmin(sim.AdminEndpoint()), stop: func() { _ = sim.Close() }}, nil
	}
	c, err := spawnChild(ctx, cfg.Spawn, "cloud", cc.Args(), cfg.ChildStderr)
	if err != nil {
		return nil, err
	}
	return &cloudHandle{ec2: c.hello.EC2, admin: newAdmin(c.hello.Admin), pid: c.hello.PID, stop: c.stop}, nil
}

// brokerHandle is a running benchmark broker.
type brokerHandle struct {
	addr string
	// pid is the child's, 0 when in this process (then Proc in its stats
	// is the whole harness's and says nothing about the broker).
	pid   int
	stats func(ctx context.Context) (BrokerStats, error)
	stop  func()
}

func startBrokerHandle(ctx context.Context, cfg Config, bc BrokerConfig) (*brokerHandle, error) {
	if cfg.Spawn == nil {
		bc.Logger = cfg.Logger
		b, err := StartBroker(ctx, bc)
		if err != nil {
			return nil, err
		}
		return &brokerHandle{addr: b.Addr, stats: func(context.Context) (BrokerStats, error) { return b.Stats(), nil }, stop: b.Close}, nil
	}
	c, err := spawnChild(ctx, cfg.Spawn, "broker", bc.Args(), cfg.ChildStderr)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 60 * time.Second}
	url := c.hello.Stats
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "broker pid %d, stats %s, profiles %s\n", c.hello.PID, url, strings.TrimSuffix(url, "stats")+"debug/pprof/")
	}
	return &brokerHandle{
		addr: c.hello.GRPC, pid: c.hello.PID, stop: c.stop,
		stats: func(ctx context.Context) (BrokerStats, error) {
			var s BrokerStats
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return s, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return s, fmt.Errorf("broker stats: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return s, errors.New("broker stats: " + resp.Status)
			}
			return s, json.NewDecoder(resp.Body).Decode(&s)
		},
	}, nil
}
