package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/allotnet/allot/internal/buildinfo"
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

broker/   what the broker answered: status, nodes, ENIs, subnet budgets and
          allotctl check (as JSON); errors.txt lists what it refused.
agents/   per agent (its introspection address): /v1/enis, /v1/pods,
          /v1/check, /healthz, /metrics and its latest log records
          (logs.jsonl).
version.txt  the allotctl that made the bundle.

Nothing secret is collected: no certificate, key, token, credential or
environment. It does hold pod names, namespaces, container IDs and
addresses. The broker's logs are not in it: add "kubectl logs" of the
broker beside it.
`

// bundle collects files for the tarball, in order.
type bundle struct {
	names []string
	files map[string][]byte
	errs  []string
}

func (b *bundle) add(name string, data []byte) {
	if b.files == nil {
		b.files = map[string][]byte{}
	}
	if _, ok := b.files[name]; !ok {
		b.names = append(b.names, name)
	}
	b.files[name] = data
}

func (b *bundle) fail(what string, err error) {
	b.errs = append(b.errs, fmt.Sprintf("%s: %v", what, rpcerr.Error(err)))
}

func cmdSupportBundle(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	var b bundle
	b.add("README.txt", []byte(bundleReadme))
	v := buildinfo.Get()
	b.add("version.txt", []byte(fmt.Sprintf("allotctl %s commit %s built %s\ncollected %s\nbroker %s\n",
		v.Version, v.Commit, v.Date, time.Now().UTC().Format(time.RFC3339), o.broker)))
	collectBroker(ctx, c, &b)
	for _, addr := range splitComma(bundleAgents) {
		collectAgent(ctx, addr, &b)
	}
	if len(b.errs) > 0 {
		b.add("errors.txt", []byte(strings.Join(b.errs, "\n")+"\n"))
	}
	name := bundleOut
	if name == "" {
		name = "allot-support-" + time.Now().UTC().Format("20060102T150405Z") + ".tar.gz"
	}
	if err := writeTarball(name, &b); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "wrote %s: %d files, %d errors (see errors.txt)\n", name, len(b.names), len(b.errs))
	return err
}

// collectBroker asks every read-only question the broker answers.
func collectBroker(ctx context.Context, c *client, b *bundle) {
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
			b.fail("broker "+q.name, err)
			continue
		}
		data, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(m)
		if err != nil {
			b.fail("broker "+q.name, err)
			continue
		}
		b.add("broker/"+q.name+".json", data)
	}
}

// collectAgent reads an agent's introspection, which is all read-only.
func collectAgent(ctx context.Context, addr string, b *bundle) {
	dir := "agents/" + strings.NewReplacer(":", "_", "/", "_").Replace(addr)
	for _, p := range []string{"/v1/enis", "/v1/pods", "/v1/check", "/healthz", "/metrics", "/v1/logs"} {
		data, err := fetchAgent(ctx, addr, p)
		if err != nil {
			b.fail("agent "+addr+" "+p, err)
			continue
		}
		file := path.Base(p) + ".json"
		switch p {
		case "/metrics":
			file = "metrics.txt"
		case "/v1/logs":
			file = "logs.jsonl"
		}
		b.add(dir+"/"+file, data)
	}
}

func fetchAgent(ctx context.Context, addr, p string) ([]byte, error) {
	url := addr
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+p, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	// A not-ready agent answers 503 with a body worth keeping.
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("GET %s: %s", p, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// writeTarball writes the files to a gzipped tar, mode 0600: it describes
// every pod of the cluster.
func writeTarball(name string, b *bundle) (err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("support bundle: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("support bundle: %w", cerr)
		}
	}()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	now := time.Now()
	names := append([]string(nil), b.names...)
	sort.Strings(names)
	for _, n := range names {
		data := b.files[n]
		hdr := &tar.Header{Name: "allot-support/" + n, Mode: 0o600, Size: int64(len(data)), ModTime: now}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("support bundle: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("support bundle: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("support bundle: %w", err)
	}
	if err := gz.Close(); err != nil {
		return fmt.Errorf("support bundle: %w", err)
	}
	return nil
}
