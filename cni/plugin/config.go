// Package plugin is the allot CNI plugin: it parses what the runtime sends,
// forwards ADD, DEL, CHECK, GC and STATUS to the node agent over its unix
// socket, and prints typed CNI results and errors. It does no networking of
// its own, so one exec costs one round trip on the socket.
package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/internal/logfmt"
)

// Defaults for the netconf fields the runtime may leave out, and the bounds
// of each call to the agent. The agent answers on a local socket in
// microseconds when it is healthy, so every bound below is about what an
// unhealthy agent, or an ADD waiting for addresses, may cost the runtime:
//
//   - ConnectTimeout: the agent's preamble on the socket, its first answer
//     to a call. An agent that is frozen (SIGSTOP) or wedged accepts
//     connections into the kernel's backlog and never answers; without
//     this bound the plugin would wait out the call's whole deadline.
//   - StatusTimeout: the whole STATUS call. The runtime asks STATUS to
//     decide whether to send ADDs at all, and wants the answer now.
//   - DelTimeout: the whole DEL call. A DEL is local teardown (netlink and a
//     checkpoint write, well under a second). Past the bound the DEL is
//     queued for the agent to replay (see Plugin.Del), so a slow agent never
//     holds up the runtime's sandbox teardown for the ADD timeout.
//   - the netconf "timeout" (DefaultTimeout): ADD, CHECK and GC.
//
// The ADD timeout is one link of a chain. An ADD that finds the node's pool
// empty waits in the agent (its --max-add-wait, 100 s by default) for
// addresses the broker is delivering, because failing early gains nothing:
// kubelet brings the pod back only 10 to 15 s later. The agent's wait ends
// AgentMargin (5 s) before our timeout, so the agent's "try again later" (or the address,
// and the pod's wiring) reaches the runtime rather than our timeout. Our
// timeout in turn ends before the runtime gives up on the sandbox: kubelet
// bounds every runtime call by its --runtime-request-timeout (2 min by
// default; RunPodSandbox, which runs the ADD, gets twice that), and within
// that call the runtime must still tear the failed sandbox down (our DEL,
// bounded by DelTimeout) and answer. MaxAddTimeout is what is left: 2 min
// less DelTimeout less 5 s for the runtime's own work (the network
// namespace, other plugins of the list). A longer timeout is not refused —
// the plugin cannot see kubelet's flag, which may have been raised — but an
// ADD with one logs a warning.
//
// A netconf timeout shorter than StatusTimeout or DelTimeout bounds those
// calls too.
const (
	DefaultAgentSocket = "/run/allot/cni.sock"
	DefaultDelQueueDir = "/var/lib/allot/del-queue"
	DefaultTimeout     = 105 * time.Second
	ConnectTimeout     = 2 * time.Second
	StatusTimeout      = 2 * time.Second
	DelTimeout         = 10 * time.Second

	// AgentMargin is how long before the ADD timeout the agent's wait for
	// addresses ends, for it to wire the pod or say "try again later" in
	// time: the agent's --max-add-wait is at most DefaultTimeout less this.
	AgentMargin = 5 * time.Second
	// RuntimeRequestTimeout is kubelet's default --runtime-request-timeout.
	RuntimeRequestTimeout = 2 * time.Minute
	// RuntimeMargin is what the ADD bounds leave the runtime for its own
	// work around our ADD and DEL within one request.
	RuntimeMargin = 5 * time.Second
	// MaxAddTimeout is the longest ADD timeout that leaves kubelet's
	// default runtime request timeout room for the failed sandbox's DEL
	// and the runtime's own work.
	MaxAddTimeout = RuntimeRequestTimeout - DelTimeout - RuntimeMargin
)

// TimeoutWarning says what is wrong with an ADD timeout longer than
// MaxAddTimeout; it is empty for one within it.
func TimeoutWarning(d time.Duration) string {
	if d <= MaxAddTimeout {
		return ""
	}
	return fmt.Sprintf("the network config's timeout %v is above %v: with kubelet's default --runtime-request-timeout (%v) "+
		"the runtime may give up on a sandbox before an ADD that waits for addresses is answered and its sandbox torn down; "+
		"lower the timeout (and the agent's --max-add-wait below it), or ignore this if kubelet's timeout was raised",
		d, MaxAddTimeout, RuntimeRequestTimeout)
}

// NetConf is the plugin's network configuration from stdin.
type NetConf struct {
	cnispec.PluginConf
	// AgentSocket is the agent's CNI socket path.
	AgentSocket string `json:"agentSocket,omitempty"`
	// Timeout bounds ADD, CHECK and GC calls to the agent, as a Go duration
	// ("30s").
	Timeout string `json:"timeout,omitempty"`
	// DelQueueDir is where DELs are queued while the agent is unreachable;
	// the agent must be configured with the same directory. Absent means
	// DefaultDelQueueDir; an empty string means no queue, as the agent's
	// --del-queue-dir="" means no replay: a DEL the agent can't take then
	// fails with "try again later" for the runtime to retry.
	DelQueueDir *string `json:"delQueueDir,omitempty"`
	// LogFormat is how the plugin writes what it logs to the runtime's
	// stderr: "text" (the default) or "json", as every allot binary's
	// --log-format (the runtime passes the plugin no flags).
	LogFormat string `json:"logFormat,omitempty"`

	timeout  time.Duration
	delQueue string // "" when DELs are not queued
}

// knownKeys are the keys allowed in allot's section of the config: allot's
// own, and those the CNI spec defines for every plugin or that libcni
// injects (runtimeConfig, prevResult, and the cni.dev/ namespace, which
// knownKey accepts wholesale). Anything else is most likely a misspelling
// of one of allot's keys, which would otherwise be ignored silently.
var knownKeys = []string{
	"agentSocket", "timeout", "delQueueDir", "logFormat",
	"cniVersion", "cniVersions", "name", "type", "capabilities", "ipam", "dns", "args",
	"runtimeConfig", "prevResult", "disableCheck", "disableGC",
}

func knownKey(k string) bool {
	return slices.Contains(knownKeys, k) || strings.HasPrefix(k, "cni.dev/")
}

// parseNetConf decodes and validates the netconf; errors are typed CNI
// errors the runtime shows to the operator.
func parseNetConf(stdin []byte) (*NetConf, error) {
	conf := &NetConf{}
	unknown, err := decodeNetConf(stdin, conf)
	if err != nil {
		return nil, err
	}
	if conf.Type == "" {
		return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "network config has no plugin type", `set "type": "allot"`)
	}
	if err := unknownKeys(unknown); err != nil {
		return nil, err
	}
	if conf.AgentSocket == "" {
		conf.AgentSocket = DefaultAgentSocket
	}
	if !filepath.IsAbs(conf.AgentSocket) {
		return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "agentSocket must be an absolute path", conf.AgentSocket)
	}
	conf.delQueue = DefaultDelQueueDir
	if conf.DelQueueDir != nil {
		conf.delQueue = *conf.DelQueueDir
	}
	if conf.delQueue != "" && !filepath.IsAbs(conf.delQueue) {
		return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "delQueueDir must be an absolute path (or \"\" for no queue)", conf.delQueue)
	}
	switch conf.LogFormat {
	case "":
		conf.LogFormat = logfmt.Text
	case logfmt.Text, logfmt.JSON:
	default:
		return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, `logFormat must be "text" or "json"`, fmt.Sprintf("got %q", conf.LogFormat))
	}
	conf.timeout = DefaultTimeout
	if conf.Timeout != "" {
		d, err := time.ParseDuration(conf.Timeout)
		if err != nil || d <= 0 {
			return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig,
				"timeout must be a positive duration such as \"30s\"", fmt.Sprintf("got %q", conf.Timeout))
		}
		conf.timeout = d
	}
	return conf, nil
}

// bound returns the timeout for a call limited to at most limit.
func (c *NetConf) bound(limit time.Duration) time.Duration {
	return min(c.timeout, limit)
}

// parsePrevResult converts the netconf's prevResult to the current spec
// version's JSON for the agent; it returns nil when there is none.
func (c *NetConf) parsePrevResult() ([]byte, error) {
	b, err := cnispec.PrevResult(c.RawPrevResult, c.CNIVersion)
	if err != nil {
		return nil, cnispec.NewError(cnispec.ErrDecodingFailure, "cannot parse prevResult", err.Error())
	}
	return b, nil
}

// validAttachments returns the runtime's cni.dev/valid-attachments for GC
// (or the key the spec first misnamed, cni.dev/attachments). An absent key
// is an error, not an empty list: treating missing evidence as "nothing is
// valid" would make the agent tear down every pod on the node.
func validAttachments(stdin []byte) ([]cnispec.GCAttachment, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &raw); err != nil {
		return nil, cnispec.NewError(cnispec.ErrDecodingFailure, "cannot parse network config", err.Error())
	}
	for _, k := range []string{"cni.dev/valid-attachments", "cni.dev/attachments"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		var list []cnispec.GCAttachment
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, cnispec.NewError(cnispec.ErrDecodingFailure, "cannot parse "+k, err.Error())
		}
		for _, a := range list {
			if a.ContainerID == "" || a.IfName == "" {
				return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "a valid attachment in "+k+" has no containerID or ifname",
					fmt.Sprintf("%+v", a))
			}
		}
		return list, nil
	}
	return nil, cnispec.NewError(cnispec.ErrInvalidNetworkConfig, "GC without cni.dev/valid-attachments",
		"refusing to treat a missing list as \"no attachment is valid\"")
}

// k8sArgs are the CNI_ARGS keys kubelet's runtimes send.
type k8sArgs struct {
	podNamespace, podName, infraContainerID, podUID string
}

// parseArgs parses CNI_ARGS. CNI_ARGS is an environment variable, so a bad
// one is reported with the spec's "invalid environment variables" code.
func parseArgs(s string) (*k8sArgs, error) {
	a := &k8sArgs{}
	if err := a.load(s); err != nil {
		return nil, cnispec.NewError(cnispec.ErrInvalidEnvironmentVariables, "invalid CNI_ARGS", err.Error())
	}
	return a, nil
}

// load reads s as the CNI library's types.LoadArgs reads it into a struct
// of the k8sArgs keys and its CommonArgs (IgnoreUnknown): KEY=VALUE pairs
// separated by ';', keys matched exactly, unknown keys an error unless
// IgnoreUnknown is true, with the library's messages.
func (a *k8sArgs) load(s string) error {
	if s == "" {
		return nil
	}
	var unknown []string
	ignore := false
	for _, pair := range strings.Split(s, ";") {
		kv := strings.Split(pair, "=")
		if len(kv) != 2 {
			return fmt.Errorf("ARGS: invalid pair %q", pair)
		}
		switch v := kv[1]; kv[0] {
		case "K8S_POD_NAMESPACE":
			a.podNamespace = v
		case "K8S_POD_NAME":
			a.podName = v
		case "K8S_POD_INFRA_CONTAINER_ID":
			a.infraContainerID = v
		case "K8S_POD_UID":
			a.podUID = v
		case "IgnoreUnknown":
			switch b := strings.ToLower(v); b {
			case "1", "true":
				ignore = true
			case "0", "false":
				ignore = false
			default:
				return fmt.Errorf("ARGS: error parsing value of pair %q: %w", pair, fmt.Errorf("boolean unmarshal error: invalid input %s", b))
			}
		case "CommonArgs": // the library's embedded struct, which no value fits
			return errors.New("ARGS: cannot unmarshal into field 'CommonArgs' - type '*types.CommonArgs' does not implement encoding.TextUnmarshaler")
		default:
			unknown = append(unknown, pair)
		}
	}
	if len(unknown) > 0 && !ignore {
		return fmt.Errorf("ARGS: unknown args %q", unknown)
	}
	return nil
}
