package plugin_test

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/plugin"
)

// TestADDBoundsChain: the plugin's ADD timeout ends before kubelet gives up
// on the sandbox, leaving it the failed sandbox's DEL and its own work, and
// the DEL keeps a bound of its own, shorter than the ADD's.
func TestADDBoundsChain(t *testing.T) {
	if plugin.RuntimeRequestTimeout != 2*time.Minute {
		t.Errorf("RuntimeRequestTimeout %v, want kubelet's default, 2m", plugin.RuntimeRequestTimeout)
	}
	if got := plugin.DefaultTimeout + plugin.DelTimeout + plugin.RuntimeMargin; got > plugin.RuntimeRequestTimeout {
		t.Errorf("ADD timeout %v + DEL timeout %v + margin %v = %v: more than the runtime request timeout %v",
			plugin.DefaultTimeout, plugin.DelTimeout, plugin.RuntimeMargin, got, plugin.RuntimeRequestTimeout)
	}
	if plugin.DefaultTimeout > plugin.MaxAddTimeout {
		t.Errorf("DefaultTimeout %v above MaxAddTimeout %v", plugin.DefaultTimeout, plugin.MaxAddTimeout)
	}
	if plugin.DelTimeout >= plugin.DefaultTimeout || plugin.StatusTimeout >= plugin.DelTimeout {
		t.Errorf("STATUS %v, DEL %v, ADD %v: want each shorter than the next", plugin.StatusTimeout, plugin.DelTimeout, plugin.DefaultTimeout)
	}
	if w := plugin.TimeoutWarning(plugin.DefaultTimeout); w != "" {
		t.Errorf("the default timeout warns: %s", w)
	}
	for d, warn := range map[time.Duration]bool{
		30 * time.Second: false, plugin.MaxAddTimeout: false,
		plugin.MaxAddTimeout + time.Second: true, 2 * time.Minute: true, 5 * time.Minute: true,
	} {
		if got := plugin.TimeoutWarning(d); (got != "") != warn {
			t.Errorf("TimeoutWarning(%v) = %q, want a warning: %v", d, got, warn)
		}
	}
}

// TestLongTimeoutWarns: an ADD under a netconf timeout past MaxAddTimeout
// still runs (kubelet's timeout may have been raised) but tells the
// runtime's log why the timeout is risky; the default says nothing.
func TestLongTimeoutWarns(t *testing.T) {
	dir := t.TempDir()
	args := func(timeout string) *cnispec.CmdArgs {
		conf := `{"cniVersion":"1.1.0","name":"allot","type":"allot","agentSocket":"` + filepath.Join(dir, "no-agent.sock") + `"`
		if timeout != "" {
			conf += `,"timeout":"` + timeout + `"`
		}
		return &cnispec.CmdArgs{ContainerID: "c0ffee", IfName: "eth0", Netns: "/run/netns/p", StdinData: []byte(conf + "}")}
	}
	for timeout, warn := range map[string]bool{"": false, "100s": false, "2m": true, "150s": true} {
		var stderr bytes.Buffer
		p := &plugin.Plugin{Stdout: io.Discard, Stderr: &stderr}
		if err := p.Add(args(timeout)); err == nil {
			t.Fatalf("timeout %q: ADD with no agent succeeded", timeout)
		}
		got := stderr.String()
		if strings.Contains(got, "ADD timeout too long") != warn || (warn && !strings.Contains(got, "runtime-request-timeout")) {
			t.Errorf("timeout %q: stderr %q, want a warning naming kubelet's flag: %v", timeout, got, warn)
		}
	}
}
