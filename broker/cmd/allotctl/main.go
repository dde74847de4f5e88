// Command allotctl is the operator's view of an allot broker: subnet
// budgets, pod networks, nodes, ENIs and cluster status, and setting a
// subnet budget or a pod network.
//
//	allotctl [--broker host:port] budgets [--by subnet|az|cluster] [--watch] [-o json]
//	allotctl max-pods --instance-type m5.large [--mode secondary-ip|prefix] [-o json]
//	allotctl budget get <subnet-id> [-o json]
//	allotctl budget set <subnet-id> --headroom N --cap N
//	allotctl pod-networks list|get <name>|delete <name> [-o json]
//	allotctl pod-networks set <name> [--az Z] [--node-group G] [--instance-tag k=v]...
//	         [--subnets s1,s2] [--subnet-tag k[=v]]... [--security-groups g1,g2] [--expected-revision R]
//	allotctl nodes [-o json]
//	allotctl enis [--node i-...] [-o json]
//	allotctl status [-o json]
//	allotctl check [--stale-after 10m] [--agents host:port,...] [--repair [--dry-run=false]] [-o json]
//	allotctl support-bundle [--agents host:port,...] [--out file.tar.gz]
//
// Errors print the broker's message and exit 1; usage errors exit 2;
// check exits 3 when it finds a disagreement.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// DefaultBroker is where allot-broker listens by default.
const DefaultBroker = "127.0.0.1:7600"

// options are the flags every command accepts, before or after its name.
type options struct {
	broker  string
	timeout time.Duration
	output  string
	caCert  string
	cert    string
	key     string
	// logFormat is how errors are written to stderr: text lines, or one
	// JSON record each for a script or a log collector.
	logFormat string
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.broker, "broker", o.broker, "broker gRPC address (host:port)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "deadline for the whole command")
	fs.StringVar(&o.output, "o", o.output, "output format: table or json")
	fs.StringVar(&o.caCert, "cacert", o.caCert, "CA bundle to verify the broker's TLS certificate (plaintext if no TLS flag is set)")
	fs.StringVar(&o.cert, "cert", o.cert, "client certificate for mutual TLS")
	fs.StringVar(&o.key, "key", o.key, "client key for mutual TLS")
	fs.StringVar(&o.logFormat, "log-format", o.logFormat, "how errors are written to stderr: text or json (one JSON object a line)")
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// command is one subcommand: it parses its own arguments into a call.
type command struct {
	summary string
	run     func(ctx context.Context, c *client, args []string, o *options, out io.Writer) error
	flags   func(fs *flag.FlagSet) // extra flags, may be nil
}

var commands = map[string]command{
	"budgets": {summary: "addresses and pods that still fit, --by subnet|az|cluster, --watch", run: cmdBudgets, flags: budgetsFlags},
	"max-pods": {summary: "kubelet's max-pods for --instance-type T --mode secondary-ip|prefix, from EC2",
		run: cmdMaxPods, flags: maxPodsFlags},
	"budget": {summary: "budget get <subnet-id> | budget set <subnet-id> --headroom N --cap N", run: cmdBudget, flags: budgetFlags},
	"pod-networks": {summary: "list | get <name> | set <name> --subnets ... | delete <name>: where nodes' new ENIs go",
		run: cmdPodNetworks, flags: podNetworkFlags},
	"nodes":  {summary: "list registered nodes with their totals", run: cmdNodes},
	"enis":   {summary: "list ENIs (--node i-... for one node)", run: cmdENIs, flags: eniFlags},
	"status": {summary: "leader and cluster totals", run: cmdStatus},
	"check": {summary: "compare EC2, etcd and (--agents) the agents' pools and host devices; exit 3 on any disagreement",
		run: cmdCheck, flags: checkFlags},
	"support-bundle": {summary: "write a tarball of what the broker and (--agents) the agents report, for a bug report",
		run: cmdSupportBundle, flags: bundleFlags},
}

func run(args []string, stdout, stderr io.Writer) int {
	if buildinfo.PrintIfRequested("allotctl", args, stdout) {
		return 0
	}
	o := &options{broker: DefaultBroker, timeout: 10 * time.Second, output: "table", logFormat: logfmt.Text}
	global := flag.NewFlagSet("allotctl", flag.ContinueOnError)
	global.SetOutput(stderr)
	o.register(global)
	buildinfo.Flag(global)
	global.Usage = func() { usage(stderr, global) }
	if err := global.Parse(args); err != nil {
		return 2
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr, global)
		return 2
	}
	cmd, ok := commands[rest[0]]
	if !ok {
		fmt.Fprintf(stderr, "allotctl: unknown command %q\n", rest[0])
		usage(stderr, global)
		return 2
	}
	fs := flag.NewFlagSet("allotctl "+rest[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.register(fs)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	positional, err := parseInterspersed(fs, rest[1:])
	if err != nil {
		return 2
	}
	if o.logFormat != logfmt.Text && o.logFormat != logfmt.JSON {
		fmt.Fprintf(stderr, "allotctl: --log-format %q: want text or json\n", o.logFormat)
		return 2
	}
	fail := failer(stderr, o.logFormat)
	if o.output != "table" && o.output != "json" {
		return fail(2, fmt.Sprintf("allotctl: -o %q: want table or json", o.output))
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	c, err := dial(o)
	if err != nil {
		return fail(1, fmt.Sprintf("allotctl: %v", err))
	}
	defer c.close()
	if err := cmd.run(ctx, c, positional, o, stdout); err != nil {
		var ue usageError
		var fe findingsError
		if errors.As(err, &fe) {
			return fail(3, fmt.Sprintf("allotctl check: %v", fe))
		}
		if errors.As(err, &ue) {
			return fail(2, fmt.Sprintf("allotctl %s: %s", rest[0], ue.msg))
		}
		// The broker's own message, without the gRPC decoration.
		return fail(1, fmt.Sprintf("allotctl: %v", rpcerr.Error(err)))
	}
	return 0
}

// failer returns the function that reports an error on stderr in format
// (a line of text, or a JSON record with the exit code) and returns code.
func failer(stderr io.Writer, format string) func(code int, msg string) int {
	if format != logfmt.JSON {
		return func(code int, msg string) int {
			fmt.Fprintln(stderr, msg)
			return code
		}
	}
	log := logfmt.New(stderr, logfmt.Options{Level: slog.LevelInfo, Format: logfmt.JSON})
	return func(code int, msg string) int {
		log.Error(msg, "exit_code", code)
		return code
	}
}

// parseInterspersed lets flags follow positional arguments
// ("budget set subnet-x --cap 10"), which the flag package alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: allotctl [flags] <command> [args] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, n := range []string{"budgets", "budget", "max-pods", "pod-networks", "nodes", "enis", "status", "check", "support-bundle"} {
		fmt.Fprintf(w, "  %-14s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nflags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// wantArgs checks the number of positional arguments.
func wantArgs(args []string, n int, what string) error {
	if len(args) != n {
		got := "none"
		if len(args) > 0 {
			got = strings.Join(args, " ")
		}
		return usageError{fmt.Sprintf("want %s, got %s", what, got)}
	}
	return nil
}
