package burst

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"

	"github.com/allotnet/allot/broker/etcdembed"
)

// EtcdChildConfig is the benchmark's etcd when it runs in a process of its
// own (Config.SeparateEtcd): the same etcd server the broker embeds, a
// member alone, so the broker's memory and etcd's can be told apart.
type EtcdChildConfig struct {
	// DataDir holds etcd's data. Required.
	DataDir string
	// Fsync makes etcd sync its WAL as in production.
	Fsync  bool
	Logger *slog.Logger
}

// Flags registers the config's flags on fs, with c's values as defaults.
func (c *EtcdChildConfig) Flags(fs *flag.FlagSet) {
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "etcd data directory")
	fs.BoolVar(&c.Fsync, "etcd-fsync", c.Fsync, "fsync etcd's WAL (production behaviour)")
}

// Args is the command line Flags parses back into c.
func (c EtcdChildConfig) Args() []string {
	return []string{"--data-dir", c.DataDir, "--etcd-fsync=" + strconv.FormatBool(c.Fsync)}
}

// ServeEtcdChild runs etcd as the benchmark's child process: it starts the
// member, writes a childHello line (its client URL) to out and serves until
// ctx ends.
func ServeEtcdChild(ctx context.Context, cfg EtcdChildConfig, out *os.File) error {
	if cfg.DataDir == "" {
		return fmt.Errorf("etcd: data directory is required")
	}
	e, err := etcdembed.Start(ctx, etcdembed.Config{
		Dir: cfg.DataDir, UnsafeNoFsync: !cfg.Fsync, Logger: cfg.Logger, ClusterToken: "allot-" + Cluster,
	})
	if err != nil {
		return err
	}
	defer e.Close()
	if err := json.NewEncoder(out).Encode(childHello{Etcd: e.Endpoints()[0], PID: os.Getpid()}); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	select {
	case <-ctx.Done():
	case err := <-e.Err():
		return fmt.Errorf("etcd failed: %w", err)
	}
	return nil
}

// etcdHandle is etcd running apart from the broker; nil when the broker
// embeds it.
type etcdHandle struct {
	endpoint string
	pid      int
	stop     func()
}

// startEtcdHandle starts etcd in a child process of its own.
func startEtcdHandle(ctx context.Context, cfg Config, ec EtcdChildConfig) (*etcdHandle, error) {
	c, err := spawnChild(ctx, cfg.Spawn, "etcd", ec.Args(), cfg.ChildStderr)
	if err != nil {
		return nil, err
	}
	if c.hello.Etcd == "" {
		c.stop()
		return nil, fmt.Errorf("etcd child named no client URL")
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "etcd pid %d at %s, apart from the broker\n", c.hello.PID, c.hello.Etcd)
	}
	return &etcdHandle{endpoint: c.hello.Etcd, pid: c.hello.PID, stop: c.stop}, nil
}
