package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/supportbundle"
)

// agentBundleReadme says what the agent's support bundle holds, inside it.
const agentBundleReadme = `allot agent support bundle

agent/    what the running agent reports on its introspection address: its
          version, node and configuration (about.json), its pool address
          by address (enis.json), its pods (pods.json), its own check of
          records against host devices (check.json), /healthz, /metrics and
          its latest log records (logs.jsonl).
version.txt  the allot-agent that made the bundle, and when.

Nothing secret is collected: no certificate, key, token, credential or
environment. It does hold pod names, namespaces, container IDs and
addresses. "allotctl support-bundle --agents ..." collects the same for
several agents, with the broker's view.
`

// runBundle is "allot-agent bundle": it reads the node's running agent
// through its introspection address and writes one tarball.
func runBundle(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("allot-agent bundle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("introspect-addr", "127.0.0.1:61679", "the running agent's introspection address")
	out := fs.String("out", "", "file to write the bundle to (default allot-agent-support-<time>.tar.gz)")
	timeout := fs.Duration("timeout", 30*time.Second, "deadline for collecting everything")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "allot-agent bundle: unexpected arguments %v\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var b supportbundle.Bundle
	b.Add("README.txt", []byte(agentBundleReadme))
	v := buildinfo.Get()
	b.Add("version.txt", []byte(fmt.Sprintf("allot-agent %s commit %s built %s\ncollected %s from %s\n",
		v.Version, v.Commit, v.Date, time.Now().UTC().Format(time.RFC3339), *addr)))
	b.CollectAgent(ctx, *addr, "agent")
	name := *out
	if name == "" {
		name = "allot-agent-support-" + time.Now().UTC().Format("20060102T150405Z") + ".tar.gz"
	}
	if err := b.Write(name); err != nil {
		fmt.Fprintf(stderr, "allot-agent bundle: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s: %d files, %d errors (see errors.txt)\n", name, b.Files(), b.Errors())
	return 0
}
