// Command allot is the allot CNI plugin. The container runtime executes it
// for every pod network ADD, DEL, CHECK, GC and STATUS; it forwards each to
// the node's allot-agent over a unix socket and prints the result.
//
// The plugin lives a few milliseconds: the runtime's goroutine that would
// follow later changes of the container's CPU limit (and so of GOMAXPROCS)
// is not started.
//
//go:debug updatemaxprocs=0
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/allotnet/allot/cni/cnispec"
	"github.com/allotnet/allot/cni/plugin"
	"github.com/allotnet/allot/cni/plugin/otlp"
	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/telemetry/traceconf"
)

// flushTimeout bounds handing the command's spans to the agent at exit, so
// an agent that answered the command but not this costs the runtime at
// most this much.
const flushTimeout = time.Second

func main() {
	// The runtime passes no arguments (CNI is driven by environment
	// variables), so --version is only ever a person asking.
	if buildinfo.PrintIfRequested("allot", os.Args[1:], os.Stdout) {
		return
	}
	// stdout carries the CNI result; the runtime logs stderr.
	p := &plugin.Plugin{Stdout: os.Stdout, Stderr: os.Stderr}
	// Tracing is configured the OpenTelemetry way, from the runtime's
	// environment (which it passes to every plugin); unset means off. A
	// bad setting must not fail pod networking: it is reported and
	// tracing stays off.
	// The plugin links no OpenTelemetry SDK and no exporter: it records its
	// spans (cni/plugin/otlp), which costs nothing when tracing is off, and
	// hands them to the agent, which exports them to its collector.
	p.Tracer = traces()
	// A missing CNI_COMMAND is an error (code 4), not a banner and exit 0,
	// which a caller could take for success.
	e := cnispec.Main(cnispec.Env{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout}, p.Funcs(), plugin.Versions)
	if p.Tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		if err := p.FlushSpans(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "allot: %v\n", err)
		}
		cancel()
	}
	if e != nil {
		if err := e.Print(os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "allot: write the error to stdout: %v\n", err)
		}
		os.Exit(1)
	}
}

// traces returns the tracer the environment configures, or nil.
func traces() *otlp.Tracer {
	cfg, err := traceconf.TraceConfigFromEnv(os.LookupEnv, "allot")
	if err != nil {
		fmt.Fprintf(os.Stderr, "allot: tracing off: %v\n", err)
		return nil
	}
	if !cfg.Enabled() {
		return nil
	}
	return otlp.New(cfg, plugin.TraceScope)
}
