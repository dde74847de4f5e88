package cnispec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// outcome is what a run of a command left: the error, stdout, and the
// arguments the command was called with (nil if it was not).
type outcome struct {
	Err    *Error
	Stdout string
	Called *CmdArgs
}

var envNames = []string{"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS", "CNI_PATH", "CNI_NETNS_OVERRIDE"}

// funcsReturning are commands that record their arguments and return ret.
func funcsReturning(ret error, called **CmdArgs) Funcs {
	f := func(a *CmdArgs) error { c := *a; *called = &c; return ret }
	return Funcs{Add: f, Del: f, Check: f, GC: f, Status: f}
}

func runOurs(env map[string]string, stdin string, versions []string, ret error) outcome {
	var o outcome
	var out bytes.Buffer
	e := Env{Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader(stdin), Stdout: &out}
	o.Err = Main(e, funcsReturning(ret, &o.Called), Versions(versions))
	o.Stdout = out.String()
	return o
}

// runLibrary runs the library's skel with the same environment, stdin and
// commands, in this process (its dispatcher reads os.Getenv, os.Stdin and
// writes os.Stdout).
func runLibrary(t *testing.T, dir string, env map[string]string, stdin string, versions []string, ret error) outcome {
	t.Helper()
	for _, k := range envNames {
		if v, ok := env[k]; ok {
			t.Setenv(k, v)
		} else {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	in, out := tempFile(t, dir, stdin), tempFile(t, dir, "")
	oldIn, oldOut := os.Stdin, os.Stdout
	os.Stdin, os.Stdout = in, out
	var o outcome
	f := func(a *skel.CmdArgs) error {
		o.Called = &CmdArgs{ContainerID: a.ContainerID, Netns: a.Netns, IfName: a.IfName, Args: a.Args,
			Path: a.Path, NetnsOverride: a.NetnsOverride, StdinData: a.StdinData}
		if ours := (*Error)(nil); errors.As(ret, &ours) {
			return types.NewError(ours.Code, ours.Msg, ours.Details)
		}
		return ret
	}
	e := skel.PluginMainFuncsWithError(skel.CNIFuncs{Add: f, Del: f, Check: f, GC: f, Status: f},
		version.PluginSupports(versions...), "")
	os.Stdin, os.Stdout = oldIn, oldOut
	in.Close()
	os.Remove(in.Name())
	defer os.Remove(out.Name())
	defer out.Close()
	if e != nil {
		o.Err = &Error{Code: e.Code, Msg: e.Msg, Details: e.Details}
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	o.Stdout = string(b)
	return o
}

func tempFile(t *testing.T, dir, content string) *os.File {
	t.Helper()
	f, err := os.CreateTemp(dir, "stdio")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func goodEnv(cmd string) map[string]string {
	return map[string]string{"CNI_COMMAND": cmd, "CNI_CONTAINERID": "c0ffee-1.x_y", "CNI_NETNS": "/run/netns/allot-no-such",
		"CNI_IFNAME": "eth0", "CNI_PATH": "/opt/cni/bin", "CNI_ARGS": "K8S_POD_NAME=a"}
}

func with(env map[string]string, k, v string) map[string]string {
	out := map[string]string{}
	for kk, vv := range env {
		out[kk] = vv
	}
	if v == "<unset>" {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

func conf(ver string) string {
	return `{"cniVersion":"` + ver + `","name":"net-1","type":"allot"}`
}

// TestMainMatchesTheLibrary runs every command through this package's
// Main and the library's skel with the same environment, stdin, spec
// versions and command outcome, and compares the error (code, message,
// details), stdout and the arguments the command got.
func TestMainMatchesTheLibrary(t *testing.T) {
	commands := []string{"ADD", "DEL", "CHECK", "GC", "STATUS", "VERSION", "", "FROB", "add"}
	var envs []map[string]string
	for _, cmd := range commands {
		g := goodEnv(cmd)
		envs = append(envs, g)
		for _, k := range envNames[1:] {
			envs = append(envs, with(g, k, "<unset>"))
		}
		for _, id := range []string{"-lead", "a/b", "ok.but space", "é"} {
			envs = append(envs, with(g, "CNI_CONTAINERID", id))
		}
		for _, ifn := range []string{".", "..", "a:b", "a b", "a\u00a0b", "a/b", "sixteen-chars-xx", "fifteen-chars-x", "é"} {
			envs = append(envs, with(g, "CNI_IFNAME", ifn))
		}
		envs = append(envs, with(g, "CNI_NETNS", "/proc/self/ns/net"), with(g, "CNI_NETNS", ""))
		for _, o := range []string{"true", "TRUE", "1", "yes"} {
			envs = append(envs, with(with(g, "CNI_NETNS", "/proc/self/ns/net"), "CNI_NETNS_OVERRIDE", o))
		}
	}
	stdins := []string{conf("1.1.0"), conf("1.0.0"), conf("0.4.0"), conf("0.3.1"), conf(""), conf("9.9.9"),
		conf("1.x"), conf("1.0.0.0"), conf("x"), `{"name":"n"}`, `{"cniVersion":"1.1.0","name":"n",`, `[]`, `"s"`, ``,
		`{"cniVersion":"1.1.0"}`, `{"cniVersion":"1.1.0","name":""}`, `{"cniVersion":"1.1.0","name":"-n"}`,
		`{"cniVersion":"1.1.0","name":"a/b"}`, `{"cniVersion":"1.1.0","name":5}`, `{"cniVersion":5,"name":"n"}`,
		`{"cniVersion":"1.1.0","name":"n","NAME":"m"}`}
	versionSets := [][]string{{"0.4.0", "1.0.0", "1.1.0"}, {"1.1.0"}, {"0.3.1", "0.4.0"}}
	rets := []error{nil, NewError(ErrTryAgainLater, "later", "d"), errors.New("plain")}
	n, dir := 0, t.TempDir()
	for _, env := range envs {
		for _, stdin := range stdins {
			for _, vs := range versionSets {
				for _, ret := range rets {
					// Only the first outcome for most environments, to
					// keep the run short; every one for the good ones.
					if ret != nil && env["CNI_IFNAME"] != "eth0" {
						continue
					}
					ours := runOurs(env, stdin, vs, ret)
					lib := runLibrary(t, dir, env, stdin, vs, ret)
					n++
					if !reflect.DeepEqual(ours, lib) {
						t.Errorf("env %v stdin %q versions %v returning %v:\n ours    %s\n library %s", env, stdin, vs, ret, show(ours), show(lib))
					}
				}
			}
		}
	}
	t.Logf("%d runs compared", n)
}

func show(o outcome) string {
	return fmt.Sprintf("err %+v stdout %q called %+v", o.Err, o.Stdout, o.Called)
}

// TestErrorPrintsAsTheLibrary: an error's bytes on stdout are the
// library's, escapes and indentation included.
func TestErrorPrintsAsTheLibrary(t *testing.T) {
	for _, e := range []*Error{NewError(ErrTryAgainLater, "later", ""), NewError(ErrInternal, "a <b> & \"c\"\n", "d\xff\u2028"),
		NewError(0, "", "")} {
		var ours bytes.Buffer
		if err := e.Print(&ours); err != nil {
			t.Fatal(err)
		}
		out := tempFile(t, t.TempDir(), "")
		old := os.Stdout
		os.Stdout = out
		err := types.NewError(e.Code, e.Msg, e.Details).Print()
		os.Stdout = old
		if err != nil {
			t.Fatal(err)
		}
		lib, err := os.ReadFile(out.Name())
		out.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ours.String() != string(lib) {
			t.Errorf("printed %q, the library %q", ours.String(), lib)
		}
		if e.Error() != types.NewError(e.Code, e.Msg, e.Details).Error() {
			t.Errorf("Error() %q, the library's %q", e.Error(), types.NewError(e.Code, e.Msg, e.Details).Error())
		}
	}
}
