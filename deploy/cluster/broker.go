package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/allotnet/allot/internal/freeport"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Broker is allot-broker running as a child process with its embedded etcd
// in the run directory. Its address stays the same across restarts, so the
// agents find it again.
type Broker struct {
	// Name is the replica's name (broker-1, broker-2…), as GetStatus names
	// the leader.
	Name string
	// Addr is the gRPC address (127.0.0.1:port); Metrics the address of
	// its /metrics.
	Addr, Metrics string
	// Admin and Budget are clients of its operator services.
	Admin  allotv1.AdminServiceClient
	Budget allotv1.BudgetServiceClient

	proc *process
	conn *grpc.ClientConn
}

// brokerElectionTTL is short so a restarted broker leads again soon after
// a crash: its predecessor's session must expire first.
const brokerElectionTTL = 3 * time.Second

// brokerNodeTTL is how long a node counts as alive after its last
// heartbeat (agents beat every agentHeartbeat).
const brokerNodeTTL = 5 * time.Second

// brokerParams are what the replicas of one cluster share.
type brokerParams struct {
	cluster, ec2Endpoint string
	timeScale            float64
	certs                *pki
	env                  []string
}

// newBrokers prepares n replicas. With more than one, each runs a member
// of one embedded etcd cluster on loopback (fixed peer and client ports,
// so a replica restarted on its data directory rejoins), as a
// three-replica StatefulSet would.
func newBrokers(bins Binaries, r *run, n int, p brokerParams) ([]*Broker, error) {
	var members []string
	var extra [][]string
	for i := range n {
		name := fmt.Sprintf("broker-%d", i+1)
		peer, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		client, err := freeport.Addr()
		if err != nil {
			return nil, err
		}
		members = append(members, name+"=http://"+peer)
		extra = append(extra, []string{"--etcd-client-url=http://" + client})
	}
	var out []*Broker
	for i := range n {
		var args []string
		if n > 1 {
			args = append(extra[i], "--etcd-initial-cluster="+strings.Join(members, ","))
		}
		b, err := newBroker(bins, r, fmt.Sprintf("broker-%d", i+1), p, args)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func newBroker(bins Binaries, r *run, name string, p brokerParams, extra []string) (*Broker, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.dir, "broker", name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	cluster, ec2Endpoint, timeScale, certs := p.cluster, p.ec2Endpoint, p.timeScale, p.certs
	args := []string{
		"--metrics-addr=" + metricsAddr,
		"--name=" + name,
		"--cluster=" + cluster,
		"--listen=" + addr,
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--ec2-endpoint=" + ec2Endpoint,
		"--time-scale=" + strconv.FormatFloat(timeScale, 'g', -1, 64),
		"--election-ttl=" + brokerElectionTTL.String(),
		"--node-ttl=" + brokerNodeTTL.String(),
		"--log-level=info",
	}
	args = append(append(args, extra...), certs.brokerArgs()...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.adminCreds()))
	if err != nil {
		return nil, fmt.Errorf("broker client: %w", err)
	}
	proc := newProcess(name, bins.Broker, args, filepath.Join(dir, "broker.log"), r.pidDir())
	proc.env = p.env
	return &Broker{
		Name: name, Addr: addr, Metrics: metricsAddr, Admin: allotv1.NewAdminServiceClient(conn), Budget: allotv1.NewBudgetServiceClient(conn),
		proc: proc, conn: conn,
	}, nil
}

// Start runs the broker and waits until a leader serves: GetStatus names
// one.
func (b *Broker) Start(ctx context.Context) error {
	if err := b.Launch(); err != nil {
		return err
	}
	return b.WaitLeader(ctx)
}

// Launch runs the broker without waiting for it: replicas of one etcd
// cluster must start together before any can elect a leader.
func (b *Broker) Launch() error { return b.proc.start() }

// Leader asks the live replicas which one leads and returns it; an error
// when none answers or none is elected.
func (c *Cluster) Leader(ctx context.Context) (*Broker, error) {
	var last error = errors.New("no broker runs")
	for _, b := range c.Brokers {
		if !b.Running() {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := b.Admin.GetStatus(cctx, &allotv1.GetStatusRequest{})
		cancel()
		if err != nil {
			last = fmt.Errorf("%s: %w", b.Name, err)
			continue
		}
		for _, l := range c.Brokers {
			if l.Name == st.GetLeader() {
				return l, nil
			}
		}
		last = fmt.Errorf("%s names leader %q", b.Name, st.GetLeader())
	}
	return nil, last
}

// WaitLeader waits until some replica leads and every running replica
// answers naming it; it returns the leader.
func (c *Cluster) WaitLeader(ctx context.Context) (*Broker, error) {
	for {
		l, err := c.Leader(ctx)
		if err == nil {
			if err = l.WaitLeader(ctx); err == nil {
				return l, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no broker leads: %w (last: %v)", ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// BrokerAddrs are the replicas' gRPC addresses, comma-separated, as
// allot-agent's and allotctl's --broker take them.
func (c *Cluster) BrokerAddrs() string {
	var a []string
	for _, b := range c.Brokers {
		a = append(a, b.Addr)
	}
	return strings.Join(a, ",")
}

// WaitLeader waits until the broker answers with a leader elected.
func (b *Broker) WaitLeader(ctx context.Context) error {
	var last error
	for {
		if st := b.proc.exitState(); st != nil {
			return fmt.Errorf("allot-broker exited (%v):\n%s", st, b.proc.logTail(30))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := b.Admin.GetStatus(cctx, &allotv1.GetStatusRequest{})
		cancel()
		if err == nil && st.GetLeader() != "" {
			return nil
		}
		if err == nil {
			err = errors.New("no leader elected yet")
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("allot-broker not leading (last: %v): %w\n%s", last, ctx.Err(), b.proc.logTail(30))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill ends the broker with SIGKILL: no shutdown code runs, as in a crash.
func (b *Broker) Kill() error { return b.proc.stop(0) }

// Stop ends the broker with SIGTERM (graceful: it resigns the lead).
func (b *Broker) Stop() error { return b.proc.stop(15 * time.Second) }

// Pause freezes the broker with SIGSTOP: it holds its sockets and its
// etcd session but answers nothing, as a process stalled by its host.
func (b *Broker) Pause() error { return b.proc.signal(syscall.SIGSTOP) }

// Resume lets a paused broker run again (SIGCONT).
func (b *Broker) Resume() error { return b.proc.signal(syscall.SIGCONT) }

// Running reports whether the broker process is alive.
func (b *Broker) Running() bool { return b.proc.running() }

// LogTail returns the last n lines of the broker's log.
func (b *Broker) LogTail(n int) string { return b.proc.logTail(n) }

func (b *Broker) close() error {
	err := b.Stop()
	return errors.Join(err, b.conn.Close())
}

// admin is the admin client of a running replica (every replica answers
// reads), the first one's when none runs.
func (c *Cluster) admin() allotv1.AdminServiceClient {
	for _, b := range c.Brokers {
		if b.Running() {
			return b.Admin
		}
	}
	return c.Broker.Admin
}
