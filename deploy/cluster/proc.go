package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// process is one of the cluster's child processes (the broker, an agent):
// its output goes to a log file in the run directory, its pid to a pid file
// there (so a later run can end it if this one crashed), and it is killed
// if the harness dies.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string
	pidPath string
	// env is added to the harness's own environment.
	env []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

func newProcess(name, bin string, args []string, logPath, pidDir string) *process {
	return &process{name: name, bin: bin, args: args, logPath: logPath, pidPath: filepath.Join(pidDir, name+".pid")}
}

// start runs the process. It is an error to start it while it runs.
func (p *process) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return fmt.Errorf("%s is already running", p.name)
	}
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log of %s: %w", p.name, err)
	}
	p.runs++
	fmt.Fprintf(logf, "==== %s run %d: %s %v\n", time.Now().Format(time.RFC3339Nano), p.runs, p.bin, p.args)
	cmd := exec.Command(p.bin, p.args...)
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// If the harness dies, whatever way, its children must not outlive it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	if err := os.WriteFile(p.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		return fmt.Errorf("record pid of %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	return nil
}

// running reports whether the process is alive.
func (p *process) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// pid is the process's id, or 0 when it does not run.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// exitState returns how the process ended, or nil while it runs (or was
// never started).
func (p *process) exitState() *os.ProcessState {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return cmd.ProcessState
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to grace for the process to end, then
// kills it. A grace of 0 sends SIGKILL at once: nothing of the process's
// shutdown code runs. Safe when not running.
func (p *process) stop(grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	sig, wait := syscall.SIGTERM, grace
	if grace == 0 {
		sig, wait = syscall.SIGKILL, 10*time.Second
	}
	_ = cmd.Process.Signal(sig)
	var err error
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("%s did not stop within %v of SIGTERM; killed", p.name, grace)
	}
	p.mu.Lock()
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if rerr := os.Remove(p.pidPath); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// signal sends sig to the process if it runs.
func (p *process) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	return cmd.Process.Signal(sig)
}

// logTail returns up to n last lines of everything the process printed,
// without its debug lines.
func (p *process) logTail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	var lines [][]byte
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		if !bytes.Contains(l, []byte("level=DEBUG")) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// spawn starts cmd from one OS thread that never exits. Linux delivers
// Pdeathsig when the thread that forked the child ends, not the process,
// and Go retires threads (one left locked in another namespace, for
// instance); children forked from an ordinary goroutine could be killed
// for that alone.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawnCh {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, done: done}
	return <-done
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnCh   = make(chan spawnReq)
)
