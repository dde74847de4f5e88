package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Import paths of the binaries the harness builds from this tree.
const (
	PluginPackage = "github.com/allotnet/allot/cni/cmd/allot"
	AgentPackage  = "github.com/allotnet/allot/agent/cmd/allot-agent"
)

// RepoRoot is the module root, found from this file's location (tests run
// from the source tree).
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("harness: no caller information")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// ConflistPath is the deployed example conflist the runtime side starts
// from.
func ConflistPath() string {
	return filepath.Join(RepoRoot(), "deploy", "cni", "10-allot.conflist")
}

// GoTool finds the go command on PATH.
func GoTool() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("find the go command: %w", err)
	}
	return goBin, nil
}

// Build compiles a main package of this module into dir/name, static
// (CGO_ENABLED=0) as the images ship it: a dynamically linked binary would
// pay the loader on every exec, which no deployed plugin or agent does.
func Build(dir, pkg, name string) (string, error) {
	goBin, err := GoTool()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// Binaries are the plugin and agent built once for a test binary.
type Binaries struct {
	// Dir holds them; it is the runtime's CNI_PATH.
	Dir string
	// Plugin is Dir/allot (the conflist's "type").
	Plugin string
	// Agent is Dir/allot-agent, or "" if it could not be built (AgentErr
	// says why).
	Agent    string
	AgentErr error
}

// BuildBinaries builds the plugin and agent into a new temporary directory.
// The plugin must build; the agent may not exist yet, which only the tests
// needing it report. Call Remove when done (from TestMain).
func BuildBinaries() (*Binaries, error) {
	dir, err := os.MkdirTemp("", Prefix+"-bin-")
	if err != nil {
		return nil, err
	}
	b := &Binaries{Dir: dir}
	if b.Plugin, err = Build(dir, PluginPackage, "allot"); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	b.Agent, b.AgentErr = Build(dir, AgentPackage, "allot-agent")
	return b, nil
}

// Remove deletes the binaries.
func (b *Binaries) Remove() error { return os.RemoveAll(b.Dir) }
