// Package supportbundle gathers what allot's processes report about
// themselves into one tarball for a bug report: allotctl support-bundle
// (the cluster's view) and allot-agent bundle (one node's) share it.
package supportbundle

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// Bundle collects files for the tarball; what could not be collected is
// kept as errors, written as errors.txt.
type Bundle struct {
	names []string
	files map[string][]byte
	errs  []string
}

// Add adds (or replaces) a file.
func (b *Bundle) Add(name string, data []byte) {
	if b.files == nil {
		b.files = map[string][]byte{}
	}
	if _, ok := b.files[name]; !ok {
		b.names = append(b.names, name)
	}
	b.files[name] = data
}

// Fail records that what could not be collected, and why.
func (b *Bundle) Fail(what string, err error) {
	b.errs = append(b.errs, fmt.Sprintf("%s: %v", what, err))
}

// Files counts the files (errors.txt too, once written).
func (b *Bundle) Files() int { return len(b.names) }

// Errors counts what could not be collected.
func (b *Bundle) Errors() int { return len(b.errs) }

// AgentPaths are the introspection routes an agent's part of a bundle
// holds, all read-only, and the file each goes to.
var AgentPaths = map[string]string{
	"/v1/about": "about.json",
	"/v1/enis":  "enis.json",
	"/v1/pods":  "pods.json",
	"/v1/check": "check.json",
	"/healthz":  "healthz.json",
	"/metrics":  "metrics.txt",
	"/v1/logs":  "logs.jsonl",
}

// CollectAgent reads an agent's introspection at addr (host:port or a
// URL) into dir.
func (b *Bundle) CollectAgent(ctx context.Context, addr, dir string) {
	paths := make([]string, 0, len(AgentPaths))
	for p := range AgentPaths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		data, err := fetch(ctx, addr, p)
		if err != nil {
			b.Fail("agent "+addr+" "+p, err)
			continue
		}
		b.Add(path.Join(dir, AgentPaths[p]), data)
	}
}

// AgentURL is p on the agent at addr, which may lack its scheme
// (http then).
func AgentURL(addr, p string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimSuffix(addr, "/") + p
}

func fetch(ctx context.Context, addr, p string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, AgentURL(addr, p), nil)
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

// Write writes the files, and errors.txt if anything failed, to a new
// gzipped tar (never over an existing file), mode 0600: it describes
// pods.
func (b *Bundle) Write(name string) (err error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("support bundle: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("support bundle: %w", cerr)
		}
	}()
	if len(b.errs) > 0 {
		b.Add("errors.txt", []byte(strings.Join(b.errs, "\n")+"\n"))
	}
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
