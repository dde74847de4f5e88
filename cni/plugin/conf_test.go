package plugin_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/cniserver/cniservertest"
	"github.com/allotnet/allot/cni/plugin"
)

// editConflist returns n's conflist with allot's own section changed by
// edit, as an operator editing the file by hand would.
func editConflist(t *testing.T, n *node, edit func(p map[string]any)) *libcni.NetworkConfigList {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(n.list.Bytes, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc["plugins"].([]any)[0].(map[string]any))
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

// TestEmptyDelQueueDirMeansNoQueue: `"delQueueDir": ""` means no queue, as
// the agent's --del-queue-dir="" means no replay. With the agent down a DEL
// must then fail with "try again later", so the runtime retries it, instead
// of answering 0 for a DEL written where nothing will ever replay it.
func TestEmptyDelQueueDirMeansNoQueue(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	list := editConflist(t, n, func(p map[string]any) { p["delQueueDir"] = "" })
	rt := pod("eeee0000000000d1", "web-0")
	if _, err := n.cni.AddNetworkList(t.Context(), list, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	before, _ := os.ReadDir(plugin.DefaultDelQueueDir)
	t.Cleanup(func() { removeNewEntries(t, plugin.DefaultDelQueueDir, before) })

	n.agent.Stop()
	err := n.cni.DelNetworkList(t.Context(), list, rt)
	if err == nil {
		t.Fatal("DEL with the agent down and no DEL queue answered 0; the DEL will never be applied")
	}
	if code, msg := cniCode(t, err); code != types.ErrTryAgainLater || !strings.Contains(msg, "delQueueDir") {
		t.Errorf("DEL with the agent down and no queue: code %d %q, want 11 naming delQueueDir", code, msg)
	}
	after, _ := os.ReadDir(plugin.DefaultDelQueueDir)
	if len(after) != len(before) {
		t.Errorf("DEL was queued in the default %s although the config says no queue", plugin.DefaultDelQueueDir)
	}
}

// removeNewEntries removes what a test wrote into dir beyond before.
func removeNewEntries(t *testing.T, dir string, before []os.DirEntry) {
	names := make([]string, 0, len(before))
	for _, e := range before {
		names = append(names, e.Name())
	}
	after, _ := os.ReadDir(dir)
	for _, e := range after {
		if !slices.Contains(names, e.Name()) {
			if err := os.Remove(dir + "/" + e.Name()); err != nil {
				t.Logf("cleanup %s: %v", e.Name(), err)
			}
		}
	}
	if len(before) == 0 {
		_ = os.Remove(dir) // only if the test created it and left it empty
	}
}

// TestUnknownConfigKeys: a misspelled key in allot's own section is a config
// error (7) naming the key, on every verb, before anything reaches the
// agent; the keys the CNI spec and libcni put there stay accepted.
func TestUnknownConfigKeys(t *testing.T) {
	b := cniservertest.NewBackend(addrs(2)...)
	n := newNode(t, "1.1.0", b)
	typo := editConflist(t, n, func(p map[string]any) {
		p["agentSockt"] = p["agentSocket"]
	})
	rt := pod("eeee0000000000d2", "web-1")
	verbs := map[string]func() error{
		"ADD":    func() error { _, err := n.cni.AddNetworkList(t.Context(), typo, rt); return err },
		"DEL":    func() error { return n.cni.DelNetworkList(t.Context(), typo, rt) },
		"STATUS": func() error { return n.cni.GetStatusNetworkList(t.Context(), typo) },
		"GC":     func() error { return n.cni.GCNetworkList(t.Context(), typo, &libcni.GCArgs{}) },
	}
	for verb, call := range verbs {
		err := call()
		if err == nil {
			t.Errorf("%s with agentSockt: succeeded, want a config error", verb)
			continue
		}
		if code, msg := cniCode(t, err); code != types.ErrInvalidNetworkConfig || !strings.Contains(msg, "agentSockt") {
			t.Errorf("%s with agentSockt: code %d %q, want 7 naming the key", verb, code, msg)
		}
	}
	if n := b.TotalCalls(); n != 0 {
		t.Errorf("a config with an unknown key reached the agent %d times", n)
	}

	// What the spec and libcni put in a plugin's section is not "unknown":
	// capabilities (and the runtimeConfig libcni injects for them), ipam,
	// dns, args, and the cni.dev/ keys.
	std := editConflist(t, n, func(p map[string]any) {
		p["capabilities"] = map[string]bool{"portMappings": true, "bandwidth": true}
		p["ipam"] = map[string]any{}
		p["dns"] = map[string]any{"nameservers": []string{"10.96.0.10"}}
		p["args"] = map[string]any{"cni": map[string]any{"labels": []any{}}}
		p["cni.dev/future-key"] = true
	})
	rt.CapabilityArgs = map[string]any{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}
	if _, err := n.cni.AddNetworkList(t.Context(), std, rt); err != nil {
		t.Fatalf("ADD with the standard CNI keys: %v", err)
	}
	if err := n.cni.CheckNetworkList(t.Context(), std, rt); err != nil {
		t.Errorf("CHECK (prevResult injected) with the standard CNI keys: %v", err)
	}
	if err := n.cni.GCNetworkList(t.Context(), std, &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: rt.ContainerID, IfName: rt.IfName}}}); err != nil {
		t.Errorf("GC (cni.dev/valid-attachments injected) with the standard CNI keys: %v", err)
	}
	if err := n.cni.DelNetworkList(t.Context(), std, rt); err != nil {
		t.Errorf("DEL with the standard CNI keys: %v", err)
	}
}
