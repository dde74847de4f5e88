package cluster

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
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

func newBroker(bins Binaries, r *run, cluster, ec2Endpoint string, timeScale float64, certs *pki, env []string) (*Broker, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.dir, "broker")
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--metrics-addr=" + metricsAddr,
		"--name=broker-1",
		"--cluster=" + cluster,
		"--listen=" + addr,
		"--data-dir=" + filepath.Join(dir, "etcd"),
		"--ec2-endpoint=" + ec2Endpoint,
		"--time-scale=" + strconv.FormatFloat(timeScale, 'g', -1, 64),
		"--election-ttl=" + brokerElectionTTL.String(),
		"--node-ttl=" + brokerNodeTTL.String(),
		"--log-level=info",
	}
	args = append(args, certs.brokerArgs()...)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(certs.adminCreds()))
	if err != nil {
		return nil, fmt.Errorf("broker client: %w", err)
	}
	proc := newProcess("broker", bins.Broker, args, filepath.Join(dir, "broker.log"), r.pidDir())
	proc.env = env
	return &Broker{
		Addr: addr, Metrics: metricsAddr, Admin: allotv1.NewAdminServiceClient(conn), Budget: allotv1.NewBudgetServiceClient(conn),
		proc: proc, conn: conn,
	}, nil
}

// Start runs the broker and waits until a leader serves: GetStatus names
// one.
func (b *Broker) Start(ctx context.Context) error {
	if err := b.proc.start(); err != nil {
		return err
	}
	return b.WaitLeader(ctx)
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
