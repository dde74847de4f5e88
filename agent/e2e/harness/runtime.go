package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// Runtime is a container runtime's side of CNI: libcni with a conflist, a
// CNI_PATH and a result cache, executing the plugin binaries for each call.
type Runtime struct {
	CNI  *libcni.CNIConfig
	List *libcni.NetworkConfigList
	// HostNS, when set, is the namespace plugins are executed in (the
	// runtime's "host"); nil means the test process's own. The allot plugin
	// only talks to the agent's socket, so it doesn't care; ptp does.
	HostNS *NetNS
}

// NewRuntime returns a runtime executing plugins from binDir with list.
func NewRuntime(t testing.TB, binDir string, list *libcni.NetworkConfigList, hostNS *NetNS) *Runtime {
	t.Helper()
	return &Runtime{CNI: libcni.NewCNIConfigWithCacheDir([]string{binDir}, t.TempDir(), nil), List: list, HostNS: hostNS}
}

// AllotConflist reads deploy/cni/10-allot.conflist and points it at this
// test's agent socket and DEL queue, as an installer would.
func AllotConflist(t testing.TB, cniVersion, socket, queueDir string) *libcni.NetworkConfigList {
	t.Helper()
	raw, err := os.ReadFile(ConflistPath())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", ConflistPath(), err)
	}
	if cniVersion != "" {
		doc["cniVersion"] = cniVersion
	}
	p := doc["plugins"].([]any)[0].(map[string]any)
	p["agentSocket"] = socket
	p["delQueueDir"] = queueDir
	p["timeout"] = "30s"
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

// in runs fn where plugins must run.
func (r *Runtime) in(fn func() error) error {
	if r.HostNS == nil {
		return fn()
	}
	return r.HostNS.Do(fn)
}

// Add runs ADD for the pod and returns the result at the current spec
// version.
func (r *Runtime) Add(ctx context.Context, p *Pod) (*current.Result, error) {
	var res types.Result
	err := r.in(func() error {
		var err error
		res, err = r.CNI.AddNetworkList(ctx, r.List, p.RT)
		return err
	})
	if err != nil {
		return nil, err
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert ADD result of %s: %w", p, err)
	}
	return cur, nil
}

// Del runs DEL for the pod.
func (r *Runtime) Del(ctx context.Context, p *Pod) error {
	return r.in(func() error { return r.CNI.DelNetworkList(ctx, r.List, p.RT) })
}

// Check runs CHECK for the pod (libcni sends the cached ADD result).
func (r *Runtime) Check(ctx context.Context, p *Pod) error {
	return r.in(func() error { return r.CNI.CheckNetworkList(ctx, r.List, p.RT) })
}

// GC runs GC with the pods' attachments as the valid list.
func (r *Runtime) GC(ctx context.Context, valid []*Pod) error {
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.RT.ContainerID, IfName: p.RT.IfName})
	}
	return r.in(func() error { return r.CNI.GCNetworkList(ctx, r.List, args) })
}

// Status runs STATUS.
func (r *Runtime) Status(ctx context.Context) error {
	return r.in(func() error { return r.CNI.GetStatusNetworkList(ctx, r.List) })
}

// Pod is one pod sandbox: its network namespace and the runtime's view of
// it. A pod recreated under the same name is a new Pod (NewSandbox).
type Pod struct {
	Namespace, Name string
	NS              *NetNS
	RT              *libcni.RuntimeConf
}

// NewPod creates a sandbox for namespace/name: a fresh network namespace
// and a random 64-hex-digit container ID, as containerd makes them.
func NewPod(t testing.TB, namespace, name string) *Pod {
	t.Helper()
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	cid := hex.EncodeToString(id)
	ns := NewNetNS(t, "pod")
	return &Pod{
		Namespace: namespace, Name: name, NS: ns,
		RT: &libcni.RuntimeConf{
			ContainerID: cid,
			NetNS:       ns.Path,
			IfName:      "eth0",
			Args: [][2]string{
				{"IgnoreUnknown", "1"},
				{"K8S_POD_NAMESPACE", namespace},
				{"K8S_POD_NAME", name},
				{"K8S_POD_INFRA_CONTAINER_ID", cid},
				{"K8S_POD_UID", "uid-" + cid[:12]},
			},
		},
	}
}

// NewSandbox is the same pod (namespace and name) in a new sandbox, as
// after a StatefulSet pod is recreated.
func (p *Pod) NewSandbox(t testing.TB) *Pod {
	t.Helper()
	return NewPod(t, p.Namespace, p.Name)
}

// String names the pod and its sandbox for messages.
func (p *Pod) String() string {
	return p.Namespace + "/" + p.Name + "@" + p.RT.ContainerID[:12]
}

// CachedResult returns the ADD result libcni cached for the pod, as a
// runtime would pass it to CHECK and DEL, and whether there is one.
func (r *Runtime) CachedResult(p *Pod) (types.Result, bool) {
	res, err := r.CNI.GetNetworkListCachedResult(r.List, p.RT)
	if err != nil || res == nil {
		return nil, false
	}
	return res, true
}
