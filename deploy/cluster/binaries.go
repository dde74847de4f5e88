package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the programs a cluster runs, all built from this module.
type Binaries struct {
	// Dir holds them; it is the runtime's CNI_PATH (the plugin's name is
	// the conflist's "type").
	Dir string
	// Plugin is the allot CNI plugin, Agent allot-agent, Broker
	// allot-broker, Ctl allotctl.
	Plugin, Agent, Broker, Ctl string
}

// commands maps each binary's name to its package in this module.
var commands = []struct{ name, pkg string }{
	{"allot", "./cni/cmd/allot"},
	{"allot-agent", "./agent/cmd/allot-agent"},
	{"allot-broker", "./broker/cmd/allot-broker"},
	{"allotctl", "./broker/cmd/allotctl"},
}

// LocateBinaries finds the four binaries in dir (as `make build` leaves
// them in bin/).
func LocateBinaries(dir string) (Binaries, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Dir: abs}
	var missing []string
	for _, c := range commands {
		p := filepath.Join(abs, c.name)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			missing = append(missing, c.name)
			continue
		}
		b.set(c.name, p)
	}
	if len(missing) > 0 {
		return b, fmt.Errorf("binaries missing from %s: %s (run `make build`, or let the harness build them)",
			abs, strings.Join(missing, ", "))
	}
	return b, nil
}

// BuildBinaries builds the four binaries from the module at moduleDir into
// outDir with `go build`.
func BuildBinaries(ctx context.Context, moduleDir, outDir string) (Binaries, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return Binaries{}, err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return Binaries{}, errors.New("the go command is not on PATH: build the binaries with `make build` and pass their directory")
	}
	args := []string{"build", "-o", outDir + string(filepath.Separator)}
	for _, c := range commands {
		args = append(args, c.pkg)
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("go build in %s: %w\n%s", moduleDir, err, out)
	}
	return LocateBinaries(outDir)
}

// ModuleDir returns the root of the allot module that holds dir (or one of
// its parents), from its go.mod.
func ModuleDir(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/allotnet/allot\n") {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no allot module (go.mod of github.com/allotnet/allot) at or above %s", dir)
		}
		d = parent
	}
}

func (b *Binaries) set(name, path string) {
	switch name {
	case "allot":
		b.Plugin = path
	case "allot-agent":
		b.Agent = path
	case "allot-broker":
		b.Broker = path
	case "allotctl":
		b.Ctl = path
	}
}
