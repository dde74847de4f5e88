package e2e_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/checkpoint"
	"github.com/allotnet/allot/agent/e2e/harness"
)

// TestBadInput: the plugin binary, executed with malformed stdin, missing
// CNI_* variables, an unsupported cniVersion, unknown CNI_ARGS or a netns
// that is not one, exits 1 with a typed CNI error naming the problem; and
// none of it changes the agent's records, its pool, EC2 or the node.
func TestBadInput(t *testing.T) {
	env := harness.NewEnv(t, bins, harness.EnvConfig{Agent: harness.AgentConfig{WarmIPs: 5, Cooldown: 200 * time.Millisecond}})
	ctx := ctxFor(t, 2*time.Minute)
	pods := newPods(t, "bad", 3)
	addrs := addAll(t, ctx, env.Runtime, pods, 3)
	victim := pods[0] // the bad DELs and CHECKs all name a live pod

	ckptBefore, err := env.Agent.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	ec2Before := env.Cloud.Assigned(t)

	notNS := filepath.Join(t.TempDir(), "not-a-netns")
	if err := os.WriteFile(notNS, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := func(ver, extra string) string {
		return `{"cniVersion":"` + ver + `","name":"allot","type":"allot","agentSocket":"` + env.Agent.Config.Socket +
			`","delQueueDir":"` + env.Agent.Config.DelQueue + `","timeout":"10s"` + extra + `}`
	}
	good := conf("1.1.0", "")
	fresh := harness.NewPod(t, "e2e", "fresh") // a sandbox that was never added
	type vars map[string]string
	base := func(cmd string, p *harness.Pod) vars {
		return vars{
			"CNI_COMMAND": cmd, "CNI_CONTAINERID": p.RT.ContainerID, "CNI_NETNS": p.NS.Path,
			"CNI_IFNAME": "eth0", "CNI_PATH": bins.Dir, "CNI_ARGS": "K8S_POD_NAMESPACE=e2e;K8S_POD_NAME=" + p.Name,
		}
	}
	with := func(v vars, k, val string) vars {
		out := vars{}
		for a, b := range v {
			out[a] = b
		}
		if val == "" {
			delete(out, k)
		} else {
			out[k] = val
		}
		return out
	}
	cases := []struct {
		name  string
		env   vars
		stdin string
		code  uint
		msg   string // must appear in the error's msg or details
	}{
		{"malformed stdin on ADD", base("ADD", fresh), `{"cniVersion":"1.1.0","name":`, types.ErrDecodingFailure, "unmarshal"},
		{"malformed stdin on DEL", base("DEL", victim), `{"cniVersion"`, types.ErrDecodingFailure, "unmarshal"},
		{"empty stdin", base("ADD", fresh), ``, types.ErrDecodingFailure, ""},
		{"missing CNI_COMMAND", with(base("ADD", fresh), "CNI_COMMAND", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_COMMAND"},
		{"missing CNI_CONTAINERID", with(base("ADD", fresh), "CNI_CONTAINERID", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"missing CNI_NETNS on ADD", with(base("ADD", fresh), "CNI_NETNS", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"missing CNI_IFNAME on DEL", with(base("DEL", victim), "CNI_IFNAME", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"missing CNI_PATH", with(base("ADD", fresh), "CNI_PATH", ""), good, types.ErrInvalidEnvironmentVariables, "CNI_PATH"},
		{"unsupported cniVersion", base("ADD", fresh), conf("9.9.9", ""), types.ErrIncompatibleCNIVersion, "9.9.9"},
		{"unsupported cniVersion on DEL", base("DEL", victim), conf("0.2.0", ""), types.ErrIncompatibleCNIVersion, "0.2.0"},
		{"unknown CNI_ARGS", with(base("ADD", fresh), "CNI_ARGS", "K8S_POD_NAME=x;FLAVOUR=strawberry"), good, types.ErrInvalidEnvironmentVariables, "FLAVOUR"},
		{"unknown CNI_ARGS on DEL", with(base("DEL", victim), "CNI_ARGS", "FLAVOUR=strawberry"), good, types.ErrInvalidEnvironmentVariables, "FLAVOUR"},
		{"CHECK without prevResult", base("CHECK", victim), good, types.ErrInvalidNetworkConfig, "prevResult"},
		{"netns that is not a namespace", with(base("ADD", fresh), "CNI_NETNS", notNS), good, 0, ""},
		{"netns that does not exist", with(base("ADD", fresh), "CNI_NETNS", "/run/netns/"+harness.Prefix+"-missing"), good, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := execPlugin(t, tc.env, tc.stdin)
			if tc.code != 0 && e.Code != tc.code {
				t.Errorf("code %d (%s), want %d", e.Code, e.Error(), tc.code)
			}
			if !strings.Contains(e.Error(), tc.msg) {
				t.Errorf("error %q does not mention %q", e.Error(), tc.msg)
			}
			if e.Msg == "" {
				t.Errorf("error %+v has no message", e)
			}
			t.Logf("code %d: %s", e.Code, e.Error())
		})
	}

	ckptAfter, err := env.Agent.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ckptBefore.Allocations, ckptAfter.Allocations) {
		t.Errorf("bad input changed the allocations:\nbefore %+v\nafter  %+v", ckptBefore.Allocations, ckptAfter.Allocations)
	}
	assertPoolKept(t, ckptBefore, ckptAfter)
	assertNothingReleased(t, "EC2", ec2Before, env.Cloud.Assigned(t))
	verifyWired(t, env, addrs)
	if q, _ := os.ReadDir(env.Agent.Config.DelQueue); len(q) != 0 {
		t.Errorf("bad input queued DELs: %v", q)
	}
	if ps, err := harness.InspectPod(fresh); err != nil || ps.Exists {
		t.Errorf("a failed ADD left eth0 in the fresh sandbox (%v, err %v)", ps.Addrs, err)
	}
	agreement(t, ctx, env)
}

// execPlugin runs the plugin binary with exactly the given environment and
// stdin, and returns the CNI error it printed; it fails the test unless the
// plugin exited 1 with a JSON error on stdout.
func execPlugin(t *testing.T, env map[string]string, stdin string) *types.Error {
	t.Helper()
	cmd := exec.Command(bins.Plugin)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 1 {
		t.Fatalf("plugin exit: %v, want status 1; stdout %q stderr %q", err, stdout.String(), stderr.String())
	}
	var e types.Error
	if err := json.Unmarshal(stdout.Bytes(), &e); err != nil {
		t.Fatalf("plugin stdout %q is not a CNI error: %v", stdout.String(), err)
	}
	return &e
}

// assertPoolKept fails if an address left the pool or became assigned
// without an allocation: a failed ADD must not leak or free an address. A
// free address may have moved to cooling and back; that is not a loss.
func assertPoolKept(t *testing.T, before, after checkpoint.State) {
	t.Helper()
	now := map[string]checkpoint.Address{}
	for _, a := range after.Addresses {
		now[a.Addr.String()] = a
	}
	for _, a := range before.Addresses {
		b, ok := now[a.Addr.String()]
		switch {
		case !ok:
			t.Errorf("%s left the pool", a.Addr)
		case b.ENIID != a.ENIID:
			t.Errorf("%s moved from %s to %s", a.Addr, a.ENIID, b.ENIID)
		case (a.State == checkpoint.Assigned) != (b.State == checkpoint.Assigned):
			t.Errorf("%s went from %s to %s", a.Addr, a.State, b.State)
		}
	}
}
