package cni

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// ReferenceVersion is the containernetworking/plugins release measured
// against (the one go.mod pins for the plugin's libraries).
const ReferenceVersion = "v1.9.1"

// ReferencePlugins are the reference plugins, by binary name.
var ReferencePlugins = map[string]string{
	"ptp":        "github.com/containernetworking/plugins/plugins/main/ptp",
	"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
}

// InstallReference installs ptp and host-local at ReferenceVersion into dir
// with `go install`, unless dir already holds both. They are built static
// (CGO_ENABLED=0), as the plugins project builds its release binaries and as
// allot's own plugin ships, so neither side pays the dynamic loader.
func InstallReference(ctx context.Context, dir string) error {
	goBin, err := harness.GoTool()
	if err != nil {
		return err
	}
	for name, pkg := range ReferencePlugins {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() {
			continue
		}
		cmd := exec.CommandContext(ctx, goBin, "install", pkg+"@"+ReferenceVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
		// Outside any module, so the reference builds from its own go.mod.
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go install %s@%s: %w\n%s", pkg, ReferenceVersion, err, out)
		}
	}
	return nil
}
