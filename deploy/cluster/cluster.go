package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/dataplane"
	"github.com/allotnet/allot/awssim/scenario"
	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// Cluster is allot running on one machine: awssim as EC2 and IMDS, its
// data plane in network namespaces, allot-broker, an allot-agent per node,
// and a container runtime's side of CNI (libcni executing the allot
// plugin) creating pods in namespaces of their own.
type Cluster struct {
	cfg Config
	log *slog.Logger
	run *run

	// Prefix names the run: every namespace starts with it.
	Prefix string
	// Dir is the run directory (state and logs of the processes).
	Dir   string
	Sim   *awssim.Sim
	Plane *dataplane.Plane
	// Brokers are the allot-broker replicas (Config.Brokers of them, one
	// etcd cluster of their embedded members); Broker is the first, which
	// any caller that needs one broker may use (every replica answers).
	Brokers []*Broker
	Broker  *Broker
	// Nodes are the instances, each with its agent.
	Nodes []*Node
	// VPCCIDR is the VPC's (primary) address range, where nodes are.
	VPCCIDR netip.Prefix
	// PodNetworks are the pod networks set at start (CustomNetworking).
	PodNetworks []PodNetwork

	outside *outsideServer
	pki     *pki // the cluster's certificates (TLS, attestation, roles)

	mu      sync.Mutex
	pods    map[*Pod]bool
	podSeq  int
	removed map[string]bool // instances removed with RemoveNode

	closeOnce sync.Once
	closeErr  error
}

// Node is one instance and its agent.
type Node struct {
	// Index is the node's position (0-based) and Name "node-<index>".
	Index int
	Name  string
	// InstanceID, SubnetID and PrimaryIP are the instance's, as EC2 has
	// them.
	InstanceID string
	SubnetID   string
	PrimaryIP  netip.Addr
	// NetNS is the path of the node's namespace (the data plane's).
	NetNS string
	Agent *Agent

	list  *libcni.NetworkConfigList
	links *linkProxy // its links to the brokers, with Config.Partitionable
	// cni is the node's runtime side of CNI, with the node's own result
	// cache, as each node's runtime keeps one (/var/lib/cni): a GC on one
	// node lists only that node's attachments.
	cni *libcni.CNIConfig
}

// The simulated VPC: two subnets in two zones; nodes alternate between
// them, so pod traffic crosses subnets through the VPC router.
var (
	vpcCIDR = netip.MustParsePrefix("10.0.0.0/16")
	subnets = []scenario.Subnet{
		{Name: "nodes-a", CIDR: "10.0.0.0/19", AZ: "us-east-1a"},
		{Name: "nodes-b", CIDR: "10.0.32.0/19", AZ: "us-east-1b"},
	}
)

func (c Config) scenario() scenario.Scenario {
	sc := scenario.Scenario{
		Region: "us-east-1", AccountID: "123456789012",
		VPCs: []scenario.VPC{{CIDRs: []string{vpcCIDR.String()}, Tags: map[string]string{"Name": "allot-cluster"}, Subnets: subnets}},
	}
	if c.CustomNetworking {
		sc.VPCs = []scenario.VPC{customNetworkingVPC()}
	}
	for i := range c.Nodes {
		sc.Instances = append(sc.Instances, scenario.Instance{
			Subnet: subnets[i%len(subnets)].Name, Type: c.InstanceType,
			Tags: map[string]string{"Name": fmt.Sprintf("node-%d", i), "role": "node"},
		})
	}
	return sc
}

// Start brings the whole cluster up and returns once every agent serves and
// every node's warm pool is filled. Leftovers of crashed runs with the same
// stem are removed first. On error, everything started is torn down.
func Start(ctx context.Context, cfg Config) (c *Cluster, err error) {
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	r, err := newRun(cfg.Stem, log)
	if err != nil {
		return nil, err
	}
	c = &Cluster{
		cfg: cfg, log: log, run: r, Prefix: r.prefix, Dir: r.dir, VPCCIDR: vpcCIDR,
		pods: map[*Pod]bool{}, removed: map[string]bool{},
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
			c = nil
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	started := time.Now()
	log.Info("starting cluster", "prefix", r.prefix, "nodes", cfg.Nodes, "type", cfg.InstanceType,
		"mode", cfg.Mode, "time_scale", cfg.TimeScale, "dir", r.dir)

	if c.Plane, err = dataplane.New(dataplane.Config{Prefix: r.prefix, Logger: cfg.ComponentLogger}); err != nil {
		return c, err
	}
	c.Sim, err = awssim.Start(ctx, awssim.Config{
		Scenario: cfg.scenario(), TimeScale: cfg.TimeScale, Seed: cfg.Seed,
		Hooks: c.Plane.Hooks(), Logger: cfg.ComponentLogger,
	})
	if err != nil {
		return c, fmt.Errorf("start awssim: %w", err)
	}
	if err := c.Plane.Bind(c.Sim.World()); err != nil {
		return c, err
	}
	if err := c.Plane.Sync(ctx); err != nil {
		return c, fmt.Errorf("data plane: %w", err)
	}
	if c.outside, err = startOutside(c.Plane.OutsideNetns(), c.Plane.OutsideAddr()); err != nil {
		return c, err
	}
	if c.pki, err = newPKI(r.dir, c.Sim); err != nil {
		return c, err
	}
	if err := c.startBrokers(ctx); err != nil {
		return c, err
	}
	if cfg.CustomNetworking {
		if err := c.setPodNetworks(ctx); err != nil {
			return c, err
		}
	}
	log.Info("awssim, data plane and brokers up", "ec2", c.Sim.EC2Endpoint(), "brokers", c.BrokerAddrs(),
		"elapsed", time.Since(started).Round(time.Millisecond))
	if err := c.startNodes(ctx); err != nil {
		return c, err
	}
	if err := c.WaitSettled(ctx); err != nil {
		return c, err
	}
	log.Info("cluster ready", "nodes", len(c.Nodes), "elapsed", time.Since(started).Round(time.Millisecond))
	return c, nil
}

// startBrokers starts every replica, then waits until one leads and each
// answers naming it.
func (c *Cluster) startBrokers(ctx context.Context) error {
	bs, err := newBrokers(c.cfg.Binaries, c.run, c.cfg.Brokers, brokerParams{
		cluster: c.run.prefix, ec2Endpoint: c.Sim.EC2Endpoint(), timeScale: c.cfg.TimeScale, certs: c.pki, env: c.cfg.Env,
	})
	if err != nil {
		return err
	}
	c.Brokers, c.Broker = bs, bs[0]
	for _, b := range bs {
		if err := b.Launch(); err != nil {
			return err
		}
	}
	for _, b := range bs {
		if err := b.WaitLeader(ctx); err != nil {
			return err
		}
	}
	return nil
}

// startNodes starts an agent per instance and waits until each serves.
func (c *Cluster) startNodes(ctx context.Context) error {
	raw, err := c.readConflist()
	if err != nil {
		return err
	}
	for i, inst := range c.Sim.World().Instances() {
		if _, err := c.startNode(raw, i, inst); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.Agent.WaitReady(ctx); err != nil {
			return fmt.Errorf("%s (%s): %w", n.Name, n.InstanceID, err)
		}
	}
	return nil
}

// readConflist reads the conflist every node's copy is made from.
func (c *Cluster) readConflist() ([]byte, error) {
	raw, err := os.ReadFile(c.cfg.Conflist)
	if err != nil {
		return nil, fmt.Errorf("read conflist: %w", err)
	}
	return raw, nil
}

// startNode prepares the agent of a running instance, named by index, with
// its copy of the conflist raw, records the node and starts the agent
// without waiting for it to serve. The node is nil when it could not be
// prepared.
func (c *Cluster) startNode(raw []byte, i int, inst world.Instance) (*Node, error) {
	n, err := c.newNode(raw, i, inst)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	return n, n.Agent.Start()
}

// newNode prepares the agent of a running instance, named by index.
func (c *Cluster) newNode(raw []byte, i int, inst world.Instance) (*Node, error) {
	var err error
	n := &Node{Index: i, Name: fmt.Sprintf("node-%d", i), InstanceID: inst.ID, SubnetID: inst.SubnetID,
		NetNS: c.Plane.NodeNetns(inst.ID)}
	if n.PrimaryIP, err = netip.ParseAddr(inst.PrivateIP); err != nil {
		return nil, fmt.Errorf("instance %s primary address: %w", inst.ID, err)
	}
	if n.NetNS == "" {
		return nil, fmt.Errorf("the data plane has no namespace for instance %s", inst.ID)
	}
	imds, err := c.Sim.IMDSEndpoint(inst.ID)
	if err != nil {
		return nil, err
	}
	brokers, err := c.brokerAddrsFor(n)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && n.links != nil {
			n.links.close()
		}
	}()
	n.Agent, err = newAgent(c.cfg.Binaries, c.run, agentParams{
		name: n.Name, imds: imds, broker: brokers, nodeNetNS: n.NetNS, mode: c.cfg.Mode,
		warm: c.cfg.Warm, cooldown: c.cfg.Cooldown, certs: c.pki, env: c.cfg.Env, extra: c.cfg.AgentArgs,
	})
	if err != nil {
		return nil, err
	}
	if n.list, err = nodeConflist(raw, n.Agent); err != nil {
		return nil, err
	}
	n.cni = libcni.NewCNIConfigWithCacheDir([]string{c.cfg.Binaries.Dir}, filepath.Join(c.run.dir, "nodes", n.Name, "cni-cache"), nil)
	return n, nil
}

// nodeConflist is the conflist as an installer would write it on the
// node: the plugin pointed at the node's agent socket and DEL queue.
func nodeConflist(raw []byte, a *Agent) (*libcni.NetworkConfigList, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse conflist: %w", err)
	}
	plugins, _ := doc["plugins"].([]any)
	found := false
	for _, p := range plugins {
		if m, ok := p.(map[string]any); ok && m["type"] == "allot" {
			m["agentSocket"] = a.Socket
			m["delQueueDir"] = a.DelQueue
			found = true
		}
	}
	if !found {
		return nil, errors.New("conflist has no plugin of type allot")
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("parse conflist: %w", err)
	}
	return list, nil
}

// Node returns the node of an instance, or nil.
func (c *Cluster) Node(instanceID string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.Nodes {
		if n.InstanceID == instanceID {
			return n
		}
	}
	return nil
}

// LiveNodes are the nodes whose instance runs (not terminated with
// TerminateInstance).
func (c *Cluster) LiveNodes() []*Node { return c.liveNodes() }

// repairTokenName is the file, in the run's directory, of the repair token
// all the nodes' agents share (they share this host).
const repairTokenName = "repair-token"

// RepairTokenFile is the agents' repair token file, for allotctl check
// --repair --agent-token-file.
func (c *Cluster) RepairTokenFile() string { return filepath.Join(c.Dir, repairTokenName) }

// liveNodes are the nodes not removed with TerminateInstance.
func (c *Cluster) liveNodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, n := range c.Nodes {
		if !c.removed[n.InstanceID] {
			out = append(out, n)
		}
	}
	return out
}

// Close tears everything down, also after a failure: pods' namespaces,
// agents, the broker, awssim and the data plane, then the run directory.
// It reports anything of the run still left in the kernel. Safe to call
// more than once.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Cluster) close() error {
	var errs []error
	c.mu.Lock()
	pods := make([]*Pod, 0, len(c.pods))
	for p := range c.pods {
		pods = append(pods, p)
	}
	c.pods = map[*Pod]bool{}
	c.mu.Unlock()
	for _, p := range pods {
		errs = append(errs, p.release())
	}
	var wg sync.WaitGroup
	agentErrs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		if n.Agent == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			agentErrs[i] = n.Agent.Stop()
		}()
	}
	wg.Wait()
	errs = append(errs, agentErrs...)
	for _, n := range c.Nodes {
		if n.links != nil {
			n.links.close()
		}
	}
	// The replicas stop together: one by one, the last ones would wait
	// for a quorum that is leaving.
	brokerErrs := make([]error, len(c.Brokers))
	for i, b := range c.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokerErrs[i] = b.close()
		}()
	}
	wg.Wait()
	errs = append(errs, brokerErrs...)
	if c.outside != nil {
		errs = append(errs, c.outside.close())
	}
	if c.Sim != nil {
		errs = append(errs, c.Sim.Close())
	}
	if c.Plane != nil {
		errs = append(errs, c.Plane.Close())
	}
	errs = append(errs, dataplane.Cleanup(c.Prefix))
	left, err := netnstest.WithPrefix(c.Prefix + podInfix)
	errs = append(errs, err)
	for _, n := range left {
		errs = append(errs, netnstest.Delete(n))
	}
	if c.cfg.LogDir != "" {
		errs = append(errs, c.copyLogs(c.cfg.LogDir))
	}
	errs = append(errs, c.run.release())
	if left, err := netnstest.WithPrefix(c.Prefix); err != nil || len(left) > 0 {
		errs = append(errs, fmt.Errorf("namespaces of run %s left after close: %v %w", c.Prefix, left, err))
	}
	c.log.Info("cluster closed", "prefix", c.Prefix)
	return errors.Join(errs...)
}

// copyLogs copies every process log of the run into dir.
func (c *Cluster) copyLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "*", "*.log"))
	nodes, _ := filepath.Glob(filepath.Join(c.Dir, "nodes", "*", "*.log"))
	brokers, _ := filepath.Glob(filepath.Join(c.Dir, "broker", "*", "*.log"))
	var errs []error
	for _, l := range slices.Concat(logs, nodes, brokers) {
		b, err := os.ReadFile(l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rel, _ := filepath.Rel(c.Dir, l)
		name := filepath.Join(dir, filepath.Base(filepath.Dir(rel))+"-"+filepath.Base(l))
		errs = append(errs, os.WriteFile(name, b, 0o644))
	}
	return errors.Join(errs...)
}
