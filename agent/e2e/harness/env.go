package harness

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"
)

// Network is the CNI network name of the deployed conflist.
const Network = "allot"

// EnvConfig tunes a whole end-to-end environment.
type EnvConfig struct {
	Cloud CloudConfig
	// Agent holds the agent's tunables (warm targets, cooldown, extra
	// flags); endpoints and paths are filled in.
	Agent AgentConfig
	// CNIVersion overrides the conflist's cniVersion.
	CNIVersion string
	// BrokerLog receives the in-process broker's logs; nil discards them.
	BrokerLog *slog.Logger
}

// Env is one node of a cluster, end to end: awssim, the node's namespaces,
// the broker, allot-agent running against them, and a runtime executing the
// allot plugin with the deployed conflist.
type Env struct {
	Cloud   *Cloud
	Node    *Node
	Broker  *Broker
	Agent   *Agent
	Runtime *Runtime
}

// NewEnv starts everything and waits until the agent serves and its pool
// holds the warm (or minimum) target. An agent that did not build fails the
// test: skipping would hide a broken tree.
func NewEnv(t testing.TB, bins *Binaries, cfg EnvConfig) *Env {
	t.Helper()
	RequireRoot(t)
	if bins.AgentErr != nil {
		t.Fatalf("%v: %v", ErrNoAgent, bins.AgentErr)
	}
	e := &Env{}
	e.Cloud = StartCloud(t, cfg.Cloud)
	e.Node = e.Cloud.Node
	e.Broker = StartBroker(t, e.Cloud, cfg.BrokerLog)
	ac := cfg.Agent
	ac.Binary = bins.Agent
	ac.IMDS = e.Cloud.IMDSEndpoint(t)
	ac.Broker = e.Broker.Addr
	// Over TLS the agent attests, with a node key that outlives restarts
	// of the agent within the test.
	ac.Extra = append(ac.Extra, "--broker-ca="+e.Broker.CAFile, "--node-key="+filepath.Join(t.TempDir(), "node.key"))
	ac.NodeNetNS = e.Node.NS.Path
	e.Agent = NewAgent(t, ac)
	e.Agent.Start()
	e.Agent.WaitReady(t, 30*time.Second)
	if n := max(ac.WarmIPs, ac.MinimumIPs); n > 0 {
		e.Agent.WaitFree(t, n, 30*time.Second)
	}
	e.Runtime = NewRuntime(t, bins.Dir, AllotConflist(t, cfg.CNIVersion, e.Agent.Config.Socket, e.Agent.Config.DelQueue), nil)
	return e
}
