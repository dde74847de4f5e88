package plugin_test

import (
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniservertest"
)

// cniCode returns the CNI error code in err, failing the test if err is not
// a typed CNI error.
func cniCode(t *testing.T, err error) (uint, string) {
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T) is not a typed CNI error", err, err)
	}
	return te.Code, te.Error()
}

// TestAddCheckDel runs one pod's life through libcni at each spec version
// the runtime may speak: the result is typed at that version and describes
// what the agent recorded; CHECK forwards a normalised prevResult; DEL is
// idempotent.
func TestAddCheckDel(t *testing.T) {
	for _, ver := range []string{"1.1.0", "1.0.0", "0.4.0"} {
		t.Run(ver, func(t *testing.T) {
			b := cniservertest.NewBackend(addrs(4)...)
			n := newNode(t, ver, b)
			rt := pod("c0ffee0000000001", "web-0")
			k := key(n.list.Name, rt)

			res, err := n.cni.AddNetworkList(t.Context(), n.list, rt)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if res.Version() != ver {
				t.Fatalf("result version %s, want %s", res.Version(), ver)
			}
			rec, ok := b.Attachments()[k]
			if !ok {
				t.Fatalf("agent has no record of %v after ADD; has %v", k, b.Attachments())
			}
			if rec.PodNamespace != "default" || rec.PodName != "web-0" || rec.NetNS != rt.NetNS {
				t.Errorf("agent got pod %s/%s netns %q, want default/web-0 %q", rec.PodNamespace, rec.PodName, rec.NetNS, rt.NetNS)
			}
			assertResult(t, res, rec.Address, rt, k)
			if ver == "0.4.0" {
				r040 := res.(*types040.Result)
				if r040.IPs[0].Version != "4" {
					t.Errorf("0.4.0 ip version %q, want \"4\"", r040.IPs[0].Version)
				}
			}

			// A retried ADD (the runtime timed out, say) gets the same address.
			res2, err := n.cni.AddNetworkList(t.Context(), n.list, rt)
			if err != nil {
				t.Fatalf("second ADD: %v", err)
			}
			assertResult(t, res2, rec.Address, rt, k)

			if err := n.cni.CheckNetworkList(t.Context(), n.list, rt); err != nil {
				t.Fatalf("CHECK: %v", err)
			}
			checks := b.Requests("check")
			prev, err := current.NewResult(checks[len(checks)-1].PrevResult)
			if err != nil {
				t.Fatalf("agent got a prevResult it can't parse as %s: %v", current.ImplementedSpecVersion, err)
			}
			if got := prev.(*current.Result).IPs[0].Address.String(); got != rec.Address.String() {
				t.Errorf("prevResult sent to agent has %s, want %s", got, rec.Address)
			}

			// The agent lost the attachment: CHECK must say so, with code 3.
			b.Forget(k)
			err = n.cni.CheckNetworkList(t.Context(), n.list, rt)
			if code, msg := cniCode(t, err); code != types.ErrUnknownContainer || !strings.Contains(msg, "unknown attachment") {
				t.Errorf("CHECK of a forgotten attachment: code %d %q, want %d mentioning the unknown attachment", code, msg, types.ErrUnknownContainer)
			}
			b.Seed(k, rec.Address.Addr())

			if err := n.cni.DelNetworkList(t.Context(), n.list, rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if _, ok := b.Attachments()[k]; ok {
				t.Fatalf("attachment still recorded after DEL")
			}
			if err := n.cni.DelNetworkList(t.Context(), n.list, rt); err != nil {
				t.Fatalf("second DEL must succeed (idempotent): %v", err)
			}
			if got := b.Calls("del"); got != 2 {
				t.Errorf("agent saw %d DELs, want 2", got)
			}
			if b.FreeCount() != 4 {
				t.Errorf("pool holds %d addresses after DEL, want all 4 back", b.FreeCount())
			}
		})
	}
}

// assertResult checks a result (any version) against the agent's record:
// host veth and pod interface, the /32, gateway 169.254.1.1, default route.
func assertResult(t *testing.T, res types.Result, want netip.Prefix, rt *libcni.RuntimeConf, k cniserver.Attachment) {
	t.Helper()
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatalf("convert result: %v", err)
	}
	if len(r.Interfaces) != 2 {
		t.Fatalf("interfaces %v, want host veth and pod interface", r.Interfaces)
	}
	host, ctr := r.Interfaces[0], r.Interfaces[1]
	if host.Name != cniservertest.HostIfName(k) || host.Sandbox != "" || host.Mac != "02:00:00:00:00:01" {
		t.Errorf("host interface %+v", host)
	}
	if ctr.Name != rt.IfName || ctr.Sandbox != rt.NetNS || ctr.Mac != "02:00:00:00:00:02" {
		t.Errorf("pod interface %+v, want %s in %s", ctr, rt.IfName, rt.NetNS)
	}
	if len(r.IPs) != 1 {
		t.Fatalf("ips %v, want one", r.IPs)
	}
	ip := r.IPs[0]
	if ip.Address.String() != want.String() {
		t.Errorf("address %s, want %s", ip.Address.String(), want)
	}
	if ip.Gateway.String() != "169.254.1.1" {
		t.Errorf("gateway %s, want 169.254.1.1", ip.Gateway)
	}
	if ip.Interface == nil || *ip.Interface != 1 {
		t.Errorf("ip interface index %v, want 1 (the pod interface)", ip.Interface)
	}
	if len(r.Routes) != 1 || r.Routes[0].Dst.String() != "0.0.0.0/0" || r.Routes[0].GW.String() != "169.254.1.1" {
		t.Errorf("routes %v, want default via 169.254.1.1", r.Routes)
	}
}

// TestGC: libcni DELs the cached attachment that is no longer valid, then
// sends GC with the valid list; the agent must remove exactly the
// attachments not listed (here also one the runtime never knew about).
func TestGC(t *testing.T) {
	b := cniservertest.NewBackend(addrs(8)...)
	n := newNode(t, "1.1.0", b)
	keep1, keep2, gone := pod("aaaa000000000001", "a"), pod("aaaa000000000002", "b"), pod("aaaa000000000003", "c")
	for _, rt := range []*libcni.RuntimeConf{keep1, keep2, gone} {
		if _, err := n.cni.AddNetworkList(t.Context(), n.list, rt); err != nil {
			t.Fatalf("ADD %s: %v", rt.ContainerID, err)
		}
	}
	stray := cniserver.Attachment{Network: n.list.Name, ContainerID: "dead000000000009", IfName: "eth0"}
	b.Seed(stray, netip.MustParseAddr("10.0.1.200"))
	other := cniserver.Attachment{Network: "another-net", ContainerID: "dead00000000000a", IfName: "eth0"}
	b.Seed(other, netip.MustParseAddr("10.0.1.201"))

	valid := []types.GCAttachment{
		{ContainerID: keep1.ContainerID, IfName: "eth0"},
		{ContainerID: keep2.ContainerID, IfName: "eth0"},
	}
	if err := n.cni.GCNetworkList(t.Context(), n.list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		t.Fatalf("GC: %v", err)
	}

	gcs := b.GCRequests()
	if len(gcs) != 1 {
		t.Fatalf("agent got %d GC calls, want 1", len(gcs))
	}
	wantValid := []cniserver.Attachment{key(n.list.Name, keep1), key(n.list.Name, keep2)}
	if gcs[0].Network != n.list.Name || !slices.Equal(gcs[0].Valid, wantValid) {
		t.Errorf("GC request %+v, want network %q valid %v", gcs[0], n.list.Name, wantValid)
	}
	got := b.Attachments()
	for _, k := range []cniserver.Attachment{key(n.list.Name, keep1), key(n.list.Name, keep2), other} {
		if _, ok := got[k]; !ok {
			t.Errorf("GC removed %v, which is valid (or another network's)", k)
		}
	}
	for _, k := range []cniserver.Attachment{key(n.list.Name, gone), stray} {
		if _, ok := got[k]; ok {
			t.Errorf("%v survived GC", k)
		}
	}
	if len(got) != 3 {
		t.Errorf("after GC the agent holds %v, want exactly the 2 valid and the other network's", got)
	}
}

// TestGCWithoutListRefused: a GC that carries no valid-attachments list at
// all (libcni without GCArgs) must not be read as "nothing is valid".
func TestGCWithoutListRefused(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	// Recorded by the agent only: libcni's own pass (a DEL for each cached
	// attachment not listed) doesn't touch it, so only the plugin's GC could.
	b.Seed(cniserver.Attachment{Network: n.list.Name, ContainerID: "abab000000000001", IfName: "eth0"}, addrs(1)[0])
	err := n.cni.GCNetworkList(t.Context(), n.list, nil)
	if code, msg := cniCode(t, err); code != types.ErrInvalidNetworkConfig || !strings.Contains(msg, "valid-attachments") {
		t.Errorf("GC without a list: code %d %q, want 7 naming the missing list", code, msg)
	}
	if b.Calls("gc") != 0 || len(b.Attachments()) != 1 {
		t.Errorf("GC without a list reached the agent (%d calls, %d attachments left)", b.Calls("gc"), len(b.Attachments()))
	}

	// An explicit empty list is the runtime saying no pod is left.
	if err := n.cni.GCNetworkList(t.Context(), n.list, &libcni.GCArgs{}); err != nil {
		t.Fatalf("GC with an empty list: %v", err)
	}
	if len(b.Attachments()) != 0 {
		t.Errorf("attachments left after GC with an empty valid list: %v", b.Attachments())
	}
}

// TestStatus: 0 with a healthy agent, 50 when its pool is empty and can't
// be refilled (it cannot serve an ADD; 51 is the spec's "existing
// containers may have limited connectivity", which an empty pool doesn't
// cause), 50 when nothing listens (no socket, or a dead agent's file).
func TestStatus(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	n := newNode(t, "1.1.0", b)
	if err := n.cni.GetStatusNetworkList(t.Context(), n.list); err != nil {
		t.Fatalf("STATUS with a healthy agent: %v", err)
	}

	b.Fail("status", cniserver.ErrPoolEmpty)
	err := n.cni.GetStatusNetworkList(t.Context(), n.list)
	if code, msg := cniCode(t, err); code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with an unrefillable pool: code %d (%s), want 50", code, msg)
	}
	b.Fail("status", nil)

	n.agent.Stop()
	if _, err := os.Stat(n.agent.Socket); !os.IsNotExist(err) {
		t.Fatalf("socket still present after stop: %v", err)
	}
	err = n.cni.GetStatusNetworkList(t.Context(), n.list)
	if code, msg := cniCode(t, err); code != types.ErrPluginNotAvailable || !strings.Contains(msg, "allot-agent running") {
		t.Errorf("STATUS with no socket: code %d %q, want 50 with a hint", code, msg)
	}

	// A dead agent's socket file: connection refused, still 50.
	if err := deadSocket(n.agent.Socket); err != nil {
		t.Fatal(err)
	}
	err = n.cni.GetStatusNetworkList(t.Context(), n.list)
	if code, msg := cniCode(t, err); code != types.ErrPluginNotAvailable {
		t.Errorf("STATUS with a dead socket file: code %d (%s), want 50", code, msg)
	}
}

// TestAddTryAgainLater: an empty pool and a down agent are both "try again
// later" (11) for ADD, with the agent's reason in the message.
func TestAddTryAgainLater(t *testing.T) {
	b := cniservertest.NewBackend()
	n := newNode(t, "1.1.0", b)
	rt := pod("bbbb000000000001", "web-1")
	_, err := n.cni.AddNetworkList(t.Context(), n.list, rt)
	if code, msg := cniCode(t, err); code != types.ErrTryAgainLater || !strings.Contains(msg, cniserver.ErrPoolEmpty.Error()) {
		t.Errorf("ADD on an empty pool: code %d %q, want 11 with the pool message", code, msg)
	}

	n.agent.Stop()
	_, err = n.cni.AddNetworkList(t.Context(), n.list, rt)
	if code, msg := cniCode(t, err); code != types.ErrTryAgainLater {
		t.Errorf("ADD with the agent down: code %d %q, want 11", code, msg)
	}
}

// TestDelQueuedWhenAgentDown: a DEL while the agent is down succeeds for the
// runtime, is on disk, and the agent's replay applies it exactly once.
func TestDelQueuedWhenAgentDown(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	rt := pod("cccc000000000001", "db-0")
	k := key(n.list.Name, rt)
	if _, err := n.cni.AddNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}

	n.agent.Stop()
	if err := n.cni.DelNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("DEL with the agent down must succeed for the runtime: %v", err)
	}
	if b.Calls("del") != 0 {
		t.Fatalf("agent saw a DEL while down")
	}
	entries, err := os.ReadDir(n.queueDir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("queue dir holds %v (err %v), want one entry", entries, err)
	}
	if fi, _ := entries[0].Info(); fi.Mode().Perm() != 0o600 {
		t.Errorf("queue entry mode %v, want 0600", fi.Mode().Perm())
	}
	if _, ok := b.Attachments()[k]; !ok {
		t.Fatal("attachment gone before replay")
	}

	rep, err := cniserver.ReplayDelQueue(t.Context(), n.queueDir, b, nil)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if !slices.Equal(rep.Applied, []cniserver.Attachment{k}) || rep.Failed != 0 || len(rep.Corrupt) != 0 {
		t.Errorf("replay report %+v, want exactly %v applied", rep, k)
	}
	if _, ok := b.Attachments()[k]; ok {
		t.Error("attachment still recorded after replay")
	}
	dels := b.Requests("del")
	if len(dels) != 1 || dels[0].Attachment != k || dels[0].QueuedAt.IsZero() ||
		dels[0].PodName != "db-0" || dels[0].NetNS != rt.NetNS {
		t.Errorf("replayed DEL requests %+v, want one for %v with its queue time, pod and netns", dels, k)
	}

	rep, err = cniserver.ReplayDelQueue(t.Context(), n.queueDir, b, nil)
	if err != nil || len(rep.Applied) != 0 {
		t.Errorf("second replay applied %v (err %v), want nothing", rep.Applied, err)
	}
	if b.Calls("del") != 1 {
		t.Errorf("agent saw %d DELs, want exactly 1", b.Calls("del"))
	}
	if entries, _ := os.ReadDir(n.queueDir); len(entries) != 0 {
		t.Errorf("queue dir still holds %v", entries)
	}
}

// TestDelAgentErrorNotQueued: an agent that answers with a real failure is
// not "unreachable"; the runtime gets the error and retries, and nothing is
// queued behind the agent's back.
func TestDelAgentErrorNotQueued(t *testing.T) {
	b := cniservertest.NewBackend(addrs(1)...)
	n := newNode(t, "1.1.0", b)
	rt := pod("dddd000000000001", "x")
	if _, err := n.cni.AddNetworkList(t.Context(), n.list, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	b.Fail("del", errors.New("netlink: device busy"))
	err := n.cni.DelNetworkList(t.Context(), n.list, rt)
	if code, msg := cniCode(t, err); code != types.ErrInternal || !strings.Contains(msg, "device busy") {
		t.Errorf("DEL with a failing agent: code %d %q, want 999 with the agent's reason", code, msg)
	}
	if _, err := os.Stat(n.queueDir); !os.IsNotExist(err) {
		t.Errorf("queue dir created although the agent answered: %v", err)
	}
}
