package burst

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/allotnet/allot/broker/brokerd"
	"github.com/allotnet/allot/internal/logfmt"
)

// RunChild runs one internal role of a benchmark command (prog), "broker",
// "etcd" or "cloud", from its arguments until its stdin closes (the harness stops
// it so, and a dead harness closes it too) or it is signalled. It returns
// the process's exit code.
func RunChild(prog, role string, args []string) int {
	fs := flag.NewFlagSet(prog+" "+role, flag.ContinueOnError)
	logFlags := logfmt.Register(fs, "warn")
	var bc BrokerConfig
	var cc CloudConfig
	var ec EtcdChildConfig
	switch role {
	case "broker":
		bc.Flags(fs)
	case "etcd":
		ec.Flags(fs)
	default:
		cc.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	lo, err := logFlags.Parse()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", prog, role, err)
		return 2
	}
	// As allot-broker's: the harness reads the child's stderr, and a
	// harness busy with thousands of agents must not stall the child's
	// goroutines on their log lines.
	logOut := logfmt.Async(os.Stderr, 0)
	defer logOut.Close(5 * time.Second)
	log := logfmt.New(logOut, lo).With("role", role)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	switch role {
	case "broker":
		// The broker's collector runs as allot-broker's does by default.
		brokerd.SetGCPercent(brokerd.DefaultGCPercent, os.Getenv("GOGC"))
		bc.Logger = log
		err = ServeBrokerChild(ctx, bc, os.Stdout)
	case "etcd":
		ec.Logger = log
		err = ServeEtcdChild(ctx, ec, os.Stdout)
	default:
		cc.Logger = log
		err = ServeCloudChild(ctx, cc, os.Stdout)
	}
	if err != nil {
		log.Error("failed", "err", err)
		return 1
	}
	return 0
}
