// Command allot is the allot CNI plugin. The container runtime executes it
// for every pod network ADD, DEL, CHECK, GC and STATUS; it forwards each to
// the node's allot-agent over a unix socket and prints the result.
package main

import (
	"log/slog"
	"os"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/allotnet/allot/cni/plugin"
	"github.com/allotnet/allot/internal/buildinfo"
)

func main() {
	// The runtime passes no arguments (CNI is driven by environment
	// variables), so --version is only ever a person asking.
	if buildinfo.PrintIfRequested("allot", os.Args[1:], os.Stdout) {
		return
	}
	p := &plugin.Plugin{
		Stdout: os.Stdout,
		// stdout carries the CNI result; the runtime logs stderr.
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	// An empty about string makes skel report a missing CNI_COMMAND as an
	// error (code 4) instead of printing a banner and exiting 0, which a
	// caller could take for success.
	skel.PluginMainFuncs(p.Funcs(), plugin.Versions, "")
}
