package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// packages is where each image binary is built from; the Makefile's
// IMAGE_BINS must list the same (TestMakefileBuildsEveryImageBinary).
var packages = map[string]string{
	"allot-agent":       "./agent/cmd/allot-agent",
	"allot":             "./cni/cmd/allot",
	"allot-install-cni": "./cni/cmd/allot-install-cni",
	"allot-broker":      "./broker/cmd/allot-broker",
	"allotctl":          "./broker/cmd/allotctl",
}

const repoRoot = "../.."

func readVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// buildBinaries builds the images' binaries as `make images` does: static,
// for linux, stamped with version.
func buildBinaries(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	args := []string{"build", "-trimpath", "-ldflags",
		"-X github.com/allotnet/allot/internal/buildinfo.version=" + version, "-o", dir + "/"}
	for _, b := range binaries() {
		args = append(args, packages[b])
	}
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built %d static binaries in %v", len(binaries()), time.Since(start).Round(time.Millisecond))
	return dir
}

func TestImages(t *testing.T) {
	version := readVersion(t)
	bins := buildBinaries(t, version)
	o := options{
		build:    build{registry: DefaultRegistry, version: version, commit: "c0ffee", date: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), arch: runtime.GOARCH},
		binDir:   bins,
		conflist: filepath.Join(repoRoot, "deploy/cni/10-allot.conflist"),
	}
	o.out = t.TempDir()
	if err := writeAll(o, io.Discard); err != nil {
		t.Fatal(err)
	}
	p, err := layout.FromPath(filepath.Join(o.out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs(bins, o.conflist) {
		t.Run(s.name, func(t *testing.T) {
			img := imageByRef(t, p, o.ref(s))
			checkConfig(t, img, s, version)
			files := layerFiles(t, img, t.TempDir())
			var want []string
			for _, f := range s.files {
				want = append(want, f.dst)
			}
			slices.Sort(want)
			if got := sortedKeys(files); !slices.Equal(got, want) {
				t.Fatalf("files in %s: %v, want %v", s.name, got, want)
			}
			for dst, local := range files {
				if !strings.HasPrefix(dst, binDir+"/") {
					continue
				}
				out, err := exec.Command(local, "--version").CombinedOutput()
				if err != nil || !strings.Contains(string(out), filepath.Base(dst)+" "+version+" ") {
					t.Errorf("%s --version from the image: %q, %v; want it to say %s", dst, out, err, version)
				}
			}
			checkTarball(t, filepath.Join(o.out, s.name+".tar"), o.ref(s), img)
		})
	}

	// The same binaries and date give the same digests.
	again := o
	again.out = t.TempDir()
	if err := writeAll(again, io.Discard); err != nil {
		t.Fatal(err)
	}
	p2, err := layout.FromPath(filepath.Join(again.out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	i1, _ := p.ImageIndex()
	i2, _ := p2.ImageIndex()
	d1, _ := i1.Digest()
	d2, _ := i2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same binaries: index digests %s and %s differ", d1, d2)
	}
}

func imageByRef(t *testing.T, p layout.Path, ref string) v1.Image {
	t.Helper()
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Annotations["org.opencontainers.image.ref.name"] == ref {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no image %s in the layout", ref)
	return nil
}

func checkConfig(t *testing.T, img v1.Image, s spec, version string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{binDir + "/" + s.name}) {
		t.Errorf("entrypoint %v", c.Entrypoint)
	}
	wantUser := map[string]string{"allot-agent": "0:0", "allot-broker": "65532:65532"}[s.name]
	if c.User != wantUser {
		t.Errorf("user %q, want %q", c.User, wantUser)
	}
	if c.Labels["org.opencontainers.image.version"] != version || cf.OS != "linux" {
		t.Errorf("labels %v os %q", c.Labels, cf.OS)
	}
}

// layerFiles extracts every regular file into dir and maps its path in
// the image to where it landed.
func layerFiles(t *testing.T, img v1.Image, dir string) map[string]string {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		local := filepath.Join(dir, filepath.Base(h.Name))
		f, err := os.OpenFile(local, os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
		files["/"+h.Name] = local
	}
}

func checkTarball(t *testing.T, path, ref string, want v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("tarball %s: %v", path, err)
	}
	d, _ := img.ConfigName()
	w, _ := want.ConfigName()
	if d != w {
		t.Errorf("tarball %s holds config %s, the layout %s", path, d, w)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestMakefileBuildsEveryImageBinary(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^IMAGE_BINS\s*:=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile has no IMAGE_BINS")
	}
	got := strings.Fields(string(m[1]))
	var want []string
	for _, b := range binaries() {
		want = append(want, packages[b])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Makefile IMAGE_BINS %v, images need %v", got, want)
	}
}
