package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/supportbundle"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

var (
	bundleOut    string
	bundleAgents string
)

func bundleFlags(fs *flag.FlagSet) {
	fs.StringVar(&bundleOut, "out", "", "file to write the bundle to (default allot-support-<time>.tar.gz)")
	fs.StringVar(&bundleAgents, "agents", "", "comma-separated introspection addresses of agents to include (host:port)")
}

// bundleReadme says what a support bundle holds, inside it.
const bundleReadme = `allot support bundle

broker/   what the broker answered: status, nodes, ENIs, subnet budgets,
          allotctl check (as JSON), and the latest log records of the
          replica that answered (logs.jsonl); errors.txt lists what it
          refused.
agents/   per agent (its introspection address): its version, node and
          configuration (about.json), /v1/enis, /v1/pods, /v1/check,
          /healthz, /metrics and its latest log records (logs.jsonl).
version.txt  the allotctl that made the bundle.

Nothing secret is collected: no certificate, key, token, credential or
environment. It does hold pod names, namespaces, container IDs and
addresses.
`

func cmdSupportBundle(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	var b supportbundle.Bundle
	b.Add("README.txt", []byte(bundleReadme))
	v := buildinfo.Get()
	b.Add("version.txt", []byte(fmt.Sprintf("allotctl %s commit %s built %s\ncollected %s\nbroker %s\n",
		v.Version, v.Commit, v.Date, time.Now().UTC().Format(time.RFC3339), o.broker)))
	collectBroker(ctx, c, &b)
	for _, addr := range splitComma(bundleAgents) {
		b.CollectAgent(ctx, addr, "agents/"+strings.NewReplacer(":", "_", "/", "_").Replace(addr))
	}
	name := bundleOut
	if name == "" {
		name = "allot-support-" + time.Now().UTC().Format("20060102T150405Z") + ".tar.gz"
	}
	if err := b.Write(name); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "wrote %s: %d files, %d errors (see errors.txt)\n", name, b.Files(), b.Errors())
	return err
}

// collectBroker asks every read-only question the broker answers.
func collectBroker(ctx context.Context, c *client, b *supportbundle.Bundle) {
	calls := []struct {
		name string
		call func() (proto.Message, error)
	}{
		{"status", func() (proto.Message, error) { return c.admin.GetStatus(ctx, &allotv1.GetStatusRequest{}) }},
		{"nodes", func() (proto.Message, error) { return c.admin.ListNodes(ctx, &allotv1.ListNodesRequest{}) }},
		{"enis", func() (proto.Message, error) { return c.admin.ListENIs(ctx, &allotv1.ListENIsRequest{}) }},
		{"budgets", func() (proto.Message, error) {
			return c.budget.ListSubnetBudgets(ctx, &allotv1.ListSubnetBudgetsRequest{})
		}},
		{"check", func() (proto.Message, error) { return c.admin.Check(ctx, &allotv1.CheckRequest{}) }},
	}
	for _, q := range calls {
		m, err := q.call()
		if err != nil {
			b.Fail("broker "+q.name, rpcerr.Error(err))
			continue
		}
		data, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			b.Fail("broker "+q.name, err)
			continue
		}
		b.Add("broker/"+q.name+".json", data)
	}
	logs, err := c.admin.GetLogs(ctx, &allotv1.GetLogsRequest{})
	if err != nil {
		b.Fail("broker logs", rpcerr.Error(err))
		return
	}
	b.Add("broker/logs.jsonl", logs.GetRecords())
}
