// Package byhand runs README's "run the pieces by hand" commands as
// written, so the path a newcomer copies keeps working.
package byhand

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

const repoRoot = "../.."

// readmeBlock returns the commands of README's by-hand block, continuation
// lines joined and trailing comments dropped.
func readmeBlock(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "Run the pieces by hand")
	if i < 0 {
		t.Fatal(`README has no "Run the pieces by hand" section`)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no sh block after README's by-hand heading")
	}
	var cmds []string
	var cur string
	for _, line := range strings.Split(s[start+6:start+6+end], "\n") {
		if k := strings.Index(line, "  #"); k >= 0 {
			line = line[:k]
		}
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur += cont
			continue
		}
		cur += line
		if cur != "" {
			cmds = append(cmds, strings.Join(strings.Fields(cur), " "))
		}
		cur = ""
	}
	return cmds
}

var flagValue = func(cmd, flag string) string {
	m := regexp.MustCompile(`--` + regexp.QuoteMeta(flag) + `[ =](\S+)`).FindStringSubmatch(cmd)
	if m == nil {
		return ""
	}
	return m[1]
}

// TestByHandConfigMatchesTheAgent: the .conf and .conflist README points
// at name the agent's --socket and --del-queue-dir from README's line.
func TestByHandConfigMatchesTheAgent(t *testing.T) {
	var agent string
	for _, c := range readmeBlock(t) {
		if strings.Contains(c, "bin/allot-agent ") && strings.Contains(c, "--socket") {
			agent = c
		}
	}
	if agent == "" {
		t.Fatal("README's by-hand block has no complete allot-agent command line")
	}
	for _, f := range []string{"deploy/cni/by-hand/allot.conf", "deploy/cni/by-hand/10-allot.conflist"} {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		var conf struct {
			AgentSocket, DelQueueDir string
			Plugins                  []struct{ AgentSocket, DelQueueDir string }
		}
		if err := json.Unmarshal(b, &conf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(conf.Plugins) == 1 {
			conf.AgentSocket, conf.DelQueueDir = conf.Plugins[0].AgentSocket, conf.Plugins[0].DelQueueDir
		}
		if conf.AgentSocket != flagValue(agent, "socket") || conf.DelQueueDir != flagValue(agent, "del-queue-dir") {
			t.Errorf("%s: agentSocket %q delQueueDir %q; README's agent has --socket %q --del-queue-dir %q", f,
				conf.AgentSocket, conf.DelQueueDir, flagValue(agent, "socket"), flagValue(agent, "del-queue-dir"))
		}
	}
}

// run is one test run of the block: its names, the processes it started.
type run struct {
	t                *testing.T
	outer, node, pod string
	dir, bin, conf   string
	procs            []*exec.Cmd
	logs             []*bytes.Buffer
}

func TestREADMEByHandPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the by-hand path creates network namespaces (run as root, as CI does)")
	}
	r := newRun(t)
	defer r.cleanup()
	for _, c := range readmeBlock(t) {
		r.step(c)
		if t.Failed() {
			return
		}
	}
}

func newRun(t *testing.T) *run {
	r := &run{t: t, dir: t.TempDir()}
	id := fmt.Sprintf("%d", os.Getpid()%100000)
	r.outer, r.node, r.pod = "ah-"+id+"-host", "ah-"+id+"-node", "ah-"+id+"-pod"
	r.bin = filepath.Join(r.dir, "bin")
	build := exec.Command("go", "build", "-o", r.bin+"/", "./awssim/cmd/awssim", "./broker/cmd/allot-broker",
		"./agent/cmd/allot-agent", "./broker/cmd/allotctl", "./cni/cmd/allot")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// The by-hand .conf with README's /tmp paths moved into this run's directory.
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy/cni/by-hand/allot.conf"))
	if err != nil {
		t.Fatal(err)
	}
	r.conf = filepath.Join(r.dir, "allot.conf")
	if err := os.WriteFile(r.conf, []byte(r.rewrite(string(b))), 0o644); err != nil {
		t.Fatal(err)
	}
	// Everything runs in a namespace of its own: README's fixed ports
	// can't meet anything else on this machine.
	for _, c := range [][]string{{"ip", "netns", "add", r.outer}, {"ip", "netns", "exec", r.outer, "ip", "link", "set", "lo", "up"}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v %s", c, err, out)
		}
	}
	return r
}

// rewrite moves README's names into this run: binaries, /tmp paths,
// namespace names; sudo is not needed as root.
func (r *run) rewrite(c string) string {
	c = strings.ReplaceAll(c, "$PWD/bin", r.bin)
	c = regexp.MustCompile(`(^|[ =])bin/`).ReplaceAllString(c, "${1}"+r.bin+"/")
	c = strings.ReplaceAll(c, "/tmp/allot-", r.dir+"/allot-")
	c = strings.ReplaceAll(c, "allot-node", r.node)
	c = strings.ReplaceAll(c, "pod1", r.pod)
	c = strings.ReplaceAll(c, "deploy/cni/by-hand/allot.conf", r.conf)
	c = strings.ReplaceAll(c, "sudo ", "")
	return c
}

func (r *run) step(readme string) {
	t := r.t
	c := r.rewrite(readme)
	switch {
	case readme == "make build", strings.HasPrefix(readme, "kill "):
		return // built above; processes are ended by PID in cleanup
	case strings.HasSuffix(c, "&"):
		r.start(readme, strings.TrimSuffix(c, "&"))
		return
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := r.exec(c)
		ok := err == nil
		switch {
		case strings.Contains(readme, "allotctl nodes"):
			ok = ok && len(strings.Split(strings.TrimSpace(out), "\n")) >= 2
		case strings.Contains(readme, "CNI_COMMAND=ADD"):
			ok = ok && addedAddress(out)
		}
		if ok {
			t.Logf("$ %s\n%s", readme, out)
			return
		}
		if time.Now().After(deadline) || strings.HasPrefix(readme, "sudo ip netns") {
			t.Errorf("$ %s\n(as %s)\nerr %v\n%s", readme, c, err, out)
			r.dumpLogs()
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// addedAddress reports whether out holds a CNI result giving the pod an
// address in the scenario's VPC (10.0.0.0/16), however the result is laid
// out (indented or not) and whatever the plugin wrote around it.
func addedAddress(out string) bool {
	var res struct {
		IPs []struct {
			Address string `json:"address"`
		} `json:"ips"`
	}
	start, end := strings.Index(out, "{"), strings.LastIndex(out, "}")
	if start < 0 || end < start || json.Unmarshal([]byte(out[start:end+1]), &res) != nil {
		return false
	}
	for _, ip := range res.IPs {
		if strings.HasPrefix(ip.Address, "10.0.") {
			return true
		}
	}
	return false
}

func (r *run) exec(c string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", r.outer, "bash", "-c", c)
	if strings.HasPrefix(c, "ip netns ") {
		// Not inside the outer namespace: ip netns exec gives each command
		// a mount namespace of its own, and a namespace file bound in one
		// would not show in the next.
		cmd = exec.CommandContext(ctx, "bash", "-c", c)
	}
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (r *run) start(readme, c string) {
	cmd := exec.Command("ip", "netns", "exec", r.outer, "bash", "-c", "exec "+c)
	cmd.Dir = repoRoot
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("$ %s: %v", readme, err)
	}
	r.t.Logf("$ %s  (pid %d)", readme, cmd.Process.Pid)
	r.procs = append(r.procs, cmd)
	r.logs = append(r.logs, &log)
}

func (r *run) dumpLogs() {
	for i, p := range r.procs {
		r.t.Logf("--- %v\n%s", p.Args[5:], r.logs[i].String())
	}
}

// cleanup ends what the run started, by PID, newest first, then removes
// the namespaces README's own last line would have.
func (r *run) cleanup() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		p := r.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	for _, ns := range []string{r.pod, r.node, r.outer} {
		if _, err := os.Stat("/run/netns/" + ns); err == nil {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				r.t.Errorf("ip netns del %s: %v %s", ns, err, out)
			}
		}
	}
}
