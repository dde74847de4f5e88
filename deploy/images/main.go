// Command images builds allot's container images without a container
// engine: each is an empty base plus one layer of allot's static binaries,
// assembled with go-containerregistry. `make images` builds the binaries
// (CGO_ENABLED=0, stamped with VERSION) and runs it.
//
// It writes one OCI image layout holding every image, each named by its
// reference in the org.opencontainers.image.ref.name annotation, and one
// tarball per image that `docker load`, `ctr images import`, `skopeo copy
// docker-archive:` or `crane push` take. The same commit and binaries give
// the same digests: every timestamp is the commit's date.
//
//	images --bin-dir out/images/bin --out out/images --tag v0.1.0 --commit ... --date 2026-11-25T00:00:00Z
//	images --list                   # the references it would build
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/allotnet/allot/internal/buildinfo"
)

// DefaultRegistry is where the manifests expect allot's images; push them
// to your own registry and set it in your kustomization (docs/install.md).
const DefaultRegistry = "ghcr.io/allotnet"

type options struct {
	build
	binDir, out, conflist string
	list                  bool
}

func main() {
	if buildinfo.PrintIfRequested("images", os.Args[1:], os.Stdout) {
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "images: %v\n", err)
		}
		os.Exit(2)
	}
	if o.list {
		for _, s := range specs(o.binDir, o.conflist) {
			fmt.Println(o.ref(s))
		}
		return
	}
	if err := writeAll(o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "images: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.binDir, "bin-dir", "out/images/bin", "directory of static linux binaries: "+strings.Join(binaries(), ", "))
	fs.StringVar(&o.out, "out", "out/images", "output directory: an OCI layout in oci/ and one tarball per image")
	fs.StringVar(&o.conflist, "conflist", "deploy/cni/10-allot.conflist", "the conflist the agent image carries")
	fs.StringVar(&o.registry, "registry", DefaultRegistry, "registry and namespace of the image references")
	fs.StringVar(&o.version, "tag", "", "image tag and version label (default: the VERSION file)")
	fs.StringVar(&o.commit, "commit", "unknown", "git commit, for the revision label")
	date := fs.String("date", "1970-01-01T00:00:00Z", "RFC 3339 time of every timestamp in the images (the commit's date)")
	fs.StringVar(&o.arch, "arch", runtime.GOARCH, "architecture the binaries were built for")
	fs.BoolVar(&o.list, "list", false, "print the image references and exit")
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.version == "" {
		v, err := os.ReadFile("VERSION")
		if err != nil {
			return o, fmt.Errorf("no --tag and no VERSION file here: %w", err)
		}
		o.version = strings.TrimSpace(string(v))
	}
	d, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return o, fmt.Errorf("--date: %w", err)
	}
	o.date = d.UTC()
	return o, nil
}

// writeAll builds every image into o.out: oci/ (one layout, every image)
// and <name>.tar each. The layout is written anew, so no stale image stays.
func writeAll(o options, progress io.Writer) error {
	ociDir := filepath.Join(o.out, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return err
	}
	p, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return fmt.Errorf("create OCI layout: %w", err)
	}
	for _, s := range specs(o.binDir, o.conflist) {
		img, err := image(s, o.build)
		if err != nil {
			return err
		}
		ref := o.ref(s)
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref,
		})); err != nil {
			return fmt.Errorf("write %s to the layout: %w", ref, err)
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return err
		}
		tarPath := filepath.Join(o.out, s.name+".tar")
		if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
		d, err := img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(progress, "%s %s %s\n", ref, d, tarPath)
	}
	return nil
}
