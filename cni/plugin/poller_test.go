package plugin_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
)

// TestCallStartsNoPoller: while the plugin waits for the agent's answer to
// an ADD it has no epoll instance. Its call is a blocking socket bounded by
// the kernel's socket timeouts, and its deadline is a time, not a timer: a
// Go process's first runtime timer (a context with a deadline sets one)
// starts the network poller, an epoll instance and a thread waiting in
// it, which every exec would pay for nothing.
func TestCallStartsNoPoller(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	release := b.Stall("add")
	defer release()
	agent := cniservertest.Serve(t, b)
	cmd := exec.Command(filepath.Join(pluginDir, "allot"))
	cmd.Env = []string{
		"CNI_COMMAND=ADD", "CNI_CONTAINERID=ffff0000000000a1", "CNI_NETNS=/var/run/netns/allot-t-poller",
		"CNI_IFNAME=eth0", "CNI_PATH=" + pluginDir, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0",
	}
	cmd.Stdin = strings.NewReader(`{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` + agent.Socket +
		`","delQueueDir":"` + filepath.Join(t.TempDir(), "q") + `"}`)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := cmd.Process.Pid
	if _, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall")); err != nil {
		release()
		<-done
		t.Skipf("cannot see which system call the plugin is in: %v", err)
	}

	// Wait until the plugin sleeps in read(2) on its socket: the agent
	// holds the answer until release.
	fds, waiting := map[string]string{}, false
	for deadline := time.Now().Add(time.Minute); !waiting && time.Now().Before(deadline); {
		select {
		case err := <-done:
			t.Fatalf("plugin exited before the agent answered: %v; stdout %q stderr %q", err, stdout.String(), stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		fds, waiting = blockedOnSocket(pid)
	}
	if !waiting {
		t.Fatal("the plugin was never seen waiting for the agent's answer on its socket")
	}
	for fd, target := range fds {
		if strings.Contains(target, "eventpoll") {
			t.Errorf("the plugin holds an epoll instance (fd %s -> %s) while it waits for the agent", fd, target)
		}
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("ADD: %v; stdout %q stderr %q", err, stdout.String(), stderr.String())
	}
}

// blockedOnSocket reads process pid's open files and reports whether its
// main thread is in read(2) on one of its sockets.
func blockedOnSocket(pid int) (fds map[string]string, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	fds = map[string]string{}
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			fds[e.Name()] = target
		}
	}
	sc, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "syscall"))
	if err != nil {
		return fds, false
	}
	f := strings.Fields(string(sc))
	if len(f) < 2 || f[0] != strconv.Itoa(unix.SYS_READ) {
		return fds, false
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 32)
	if err != nil {
		return fds, false
	}
	return fds, strings.HasPrefix(fds[strconv.Itoa(int(fd))], "socket:")
}
