package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/internal/freeport"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// AgentConfig is how a test runs allot-agent. Paths are filled in by
// StartAgent when empty.
type AgentConfig struct {
	// Binary is the allot-agent executable.
	Binary string
	IMDS   string
	Broker string
	// NodeNetNS is the node namespace the agent programs.
	NodeNetNS string

	Checkpoint string
	Socket     string
	DelQueue   string
	// Introspect is the 127.0.0.1 address of /v1/pods and friends.
	Introspect string

	WarmIPs    int
	MinimumIPs int
	Cooldown   time.Duration
	MaxAddWait time.Duration
	// LogLevel is --log-level; empty means debug (the log is shown when a
	// test fails).
	LogLevel string
	// Extra are more flags, appended last.
	Extra []string
}

// args renders the config as allot-agent's command line.
func (c AgentConfig) args() []string {
	a := []string{
		"--imds-endpoint=" + c.IMDS,
		"--broker=" + c.Broker,
		"--node-netns=" + c.NodeNetNS,
		"--checkpoint=" + c.Checkpoint,
		"--socket=" + c.Socket,
		"--del-queue-dir=" + c.DelQueue,
		"--introspect-addr=" + c.Introspect,
	}
	if c.LogLevel == "" {
		c.LogLevel = "debug"
	}
	a = append(a, "--log-level="+c.LogLevel)
	if c.Cooldown != 0 {
		a = append(a, "--cooldown="+c.Cooldown.String())
	}
	if c.WarmIPs > 0 {
		a = append(a, "--warm-ip-target="+strconv.Itoa(c.WarmIPs))
	}
	if c.MinimumIPs > 0 {
		a = append(a, "--minimum-ip-target="+strconv.Itoa(c.MinimumIPs))
	}
	if c.MaxAddWait > 0 {
		a = append(a, "--max-add-wait="+c.MaxAddWait.String())
	}
	return append(a, c.Extra...)
}

// Agent is allot-agent running as a subprocess, so a test can kill -9 it
// and start it again on the same files.
type Agent struct {
	Config AgentConfig
	t      testing.TB
	dir    string
	log    string

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState
	runs  int
}

// NewAgent prepares an agent for the node: a short state directory (unix
// socket paths are limited to 108 bytes), a free introspection port, and
// the node's IMDS and the broker's address. It does not start it.
func NewAgent(t testing.TB, cfg AgentConfig) *Agent {
	t.Helper()
	dir, err := os.MkdirTemp("", Prefix+"-agent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cfg.Checkpoint == "" {
		cfg.Checkpoint = filepath.Join(dir, "checkpoint.json")
	}
	if cfg.Socket == "" {
		cfg.Socket = filepath.Join(dir, "run", "cni.sock")
	}
	if cfg.DelQueue == "" {
		cfg.DelQueue = filepath.Join(dir, "del-queue")
	}
	if cfg.Introspect == "" {
		cfg.Introspect = freeLocalAddr(t)
	}
	a := &Agent{Config: cfg, t: t, dir: dir, log: filepath.Join(dir, "agent.log")}
	t.Cleanup(func() {
		a.Stop()
		if t.Failed() {
			t.Logf("allot-agent log (%s):\n%s", a.log, a.LogTail(200))
		}
	})
	return a
}

// Start runs the agent. It returns once the process started; WaitReady
// waits for it to serve.
func (a *Agent) Start() {
	a.t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		a.t.Fatal("agent already running")
	}
	logf, err := os.OpenFile(a.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		a.t.Fatal(err)
	}
	a.runs++
	fmt.Fprintf(logf, "==== start %d: %v\n", a.runs, a.Config.args())
	cmd := exec.Command(a.Config.Binary, a.Config.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the test binary dies, the agent must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		a.t.Fatalf("start allot-agent: %v", err)
	}
	done := make(chan struct{})
	a.cmd, a.done = cmd, done
	go func() {
		_ = cmd.Wait()
		logf.Close()
		a.mu.Lock()
		a.state = cmd.ProcessState
		a.mu.Unlock()
		close(done)
	}()
}

// Kill9 sends SIGKILL and waits for the process to be gone: no shutdown
// code of the agent runs.
func (a *Agent) Kill9() {
	a.t.Helper()
	a.signal(syscall.SIGKILL, 0)
}

// Freeze stops the agent with SIGSTOP, as a wedged or frozen process looks
// to its clients: its socket still accepts connections, and nothing answers.
// The returned thaw (also run when the test ends) resumes it with SIGCONT.
func (a *Agent) Freeze() (thaw func()) {
	a.t.Helper()
	a.mu.Lock()
	cmd := a.cmd
	a.mu.Unlock()
	if cmd == nil {
		a.t.Fatal("agent not running")
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		a.t.Fatalf("SIGSTOP allot-agent: %v", err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGCONT) }) }
	a.t.Cleanup(thaw)
	return thaw
}

// Stop asks the agent to stop (SIGTERM) and kills it if it hasn't within
// 10 s. Safe when not running.
func (a *Agent) Stop() {
	a.signal(syscall.SIGTERM, 10*time.Second)
}

func (a *Agent) signal(sig syscall.Signal, grace time.Duration) {
	a.mu.Lock()
	cmd, done := a.cmd, a.done
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-done:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
		}
	}
	<-done
	a.mu.Lock()
	a.cmd, a.done = nil, nil
	a.mu.Unlock()
}

// Exited returns the process's exit state once it ended by itself within
// wait, or nil if it is still running.
func (a *Agent) Exited(wait time.Duration) *os.ProcessState {
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done == nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.state
	}
	select {
	case <-done:
		a.mu.Lock()
		defer a.mu.Unlock()
		a.cmd, a.done = nil, nil
		return a.state
	case <-time.After(wait):
		return nil
	}
}

// LogTail returns up to n last lines of everything the agent printed.
func (a *Agent) LogTail(n int) string {
	b, _ := os.ReadFile(a.log)
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Log returns everything the agent printed, over all its runs.
func (a *Agent) Log() string {
	b, _ := os.ReadFile(a.log)
	return string(b)
}

// CNI returns a gRPC client on the agent's socket, for polling STATUS
// without a plugin exec.
func (a *Agent) CNI(t testing.TB) allotv1.CNIServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+a.Config.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return allotv1.NewCNIServiceClient(conn)
}

// WaitReady waits until the agent answers STATUS with success, failing the
// test (with the agent's log) if it exits or doesn't within timeout.
func (a *Agent) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	c := a.CNI(t)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if st := a.Exited(0); st != nil {
			t.Fatalf("allot-agent exited (%v) before it was ready:\n%s", st, a.LogTail(60))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, last = c.Status(ctx, &allotv1.CNIStatusRequest{})
		cancel()
		if last == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("allot-agent not ready after %v (last STATUS: %v):\n%s", timeout, last, a.LogTail(60))
}

// Checkpoint loads the agent's checkpoint file with the agent's own reader.
func (a *Agent) Checkpoint() (checkpoint.State, error) {
	return checkpoint.New(a.Config.Checkpoint).Load()
}

// WaitFree waits until the checkpoint shows at least n free addresses
// (the warm pool filled from the broker), failing after timeout.
func (a *Agent) WaitFree(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var free int
	var err error
	for time.Now().Before(deadline) {
		var st checkpoint.State
		if st, err = a.Checkpoint(); err == nil {
			free = 0
			for _, ad := range st.Addresses {
				if ad.State == checkpoint.Free {
					free++
				}
			}
			if free >= n {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("agent pool has %d free addresses after %v, want %d (checkpoint: %v):\n%s", free, timeout, n, err, a.LogTail(60))
}

// Get fetches an introspection path ("/v1/pods") and returns the body.
func (a *Agent) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+a.Config.Introspect+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %s: %s", path, resp.Status, b)
	}
	return b, nil
}

// freeLocalAddr returns a 127.0.0.1 address free right now.
func freeLocalAddr(t testing.TB) string {
	t.Helper()
	a, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ErrNoAgent is returned when the agent binary could not be built.
var ErrNoAgent = errors.New("allot-agent binary not available")
