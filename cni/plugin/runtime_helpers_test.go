package plugin_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniservertest"
)

// pluginDir holds the plugin binary built once for the whole package.
var pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "allot-t-plugin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if err := buildPlugin(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		pluginDir = dir
		return m.Run()
	}()
	os.Exit(code)
}

// buildPlugin builds cni/cmd/allot into dir as "allot", the name the
// conflist's "type" makes the runtime look for.
func buildPlugin(dir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build plugin: the go command is not on PATH: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-o", filepath.Join(dir, "allot"), "github.com/allotnet/allot/cni/cmd/allot")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build plugin: %v\n%s", err, out)
	}
	return nil
}

// node is one simulated node: a fake agent on a socket, the DEL queue dir
// and a runtime (libcni) configured from deploy/cni/10-allot.conflist.
type node struct {
	backend  *cniservertest.Backend
	agent    *cniservertest.Agent
	queueDir string
	cni      *libcni.CNIConfig
	list     *libcni.NetworkConfigList
}

func newNode(t *testing.T, cniVersion string, b *cniservertest.Backend) *node {
	t.Helper()
	n := &node{backend: b, agent: cniservertest.Serve(t, b), queueDir: filepath.Join(t.TempDir(), "del-queue")}
	n.list = loadConflist(t, cniVersion, n.agent.Socket, n.queueDir)
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{pluginDir}, t.TempDir(), nil)
	return n
}

// loadConflist reads the deployed example and points it at this test's
// socket and queue dir.
func loadConflist(t *testing.T, cniVersion, socket, queueDir string) *libcni.NetworkConfigList {
	t.Helper()
	raw, err := os.ReadFile("../../deploy/cni/10-allot.conflist")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("deploy/cni/10-allot.conflist: %v", err)
	}
	doc["cniVersion"] = cniVersion
	p := doc["plugins"].([]any)[0].(map[string]any)
	p["agentSocket"] = socket
	p["delQueueDir"] = queueDir
	p["timeout"] = "20s"
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatalf("parse conflist: %v", err)
	}
	return list
}

// pod returns the runtime's view of one pod sandbox; the netns path is
// only recorded by the fake agent, never entered.
func pod(id, name string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: id,
		NetNS:       "/var/run/netns/allot-t-" + id,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", "default"},
			{"K8S_POD_NAME", name},
			{"K8S_POD_INFRA_CONTAINER_ID", id},
			{"K8S_POD_UID", "uid-" + id},
		},
	}
}

func key(network string, rt *libcni.RuntimeConf) cniserver.Attachment {
	return cniserver.Attachment{Network: network, ContainerID: rt.ContainerID, IfName: rt.IfName}
}

func addrs(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	a := netip.MustParseAddr("10.0.1.10")
	for i := range out {
		out[i] = a
		a = a.Next()
	}
	return out
}

// deadSocket leaves a socket file at path with nobody listening, as an agent
// killed with SIGKILL does.
func deadSocket(path string) error {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(false)
	return l.Close()
}
