// Command allot-install-cni is the agent DaemonSet's init container: it
// copies the allot CNI plugin into the node's CNI binary directory and the
// conflist into its configuration directory. Images hold no shell, so this
// small program does what aws-node's install script does.
//
// Each file is written beside its destination and renamed over it, so a
// container runtime executing the plugin or reading the conflist at that
// moment sees the old file or the new one, never half of one.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/allotnet/allot/internal/buildinfo"
	"github.com/allotnet/allot/internal/logfmt"
)

type options struct {
	plugin, binDir, conflist, confDir string
	log                               logfmt.Options
}

func main() {
	if buildinfo.PrintIfRequested("allot-install-cni", os.Args[1:], os.Stdout) {
		return
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "allot-install-cni: %v\n", err)
		}
		os.Exit(2)
	}
	log := logfmt.New(os.Stderr, o.log)
	if err := install(o); err != nil {
		log.Error("allot-install-cni failed", "err", err)
		os.Exit(1)
	}
	log.Info("installed the CNI plugin and its conflist", "plugin", filepath.Base(o.plugin), "bin_dir", o.binDir,
		"conflist", filepath.Base(o.conflist), "conf_dir", o.confDir)
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("allot-install-cni", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.plugin, "plugin", "/usr/local/bin/allot", "the plugin binary to install")
	fs.StringVar(&o.binDir, "bin-dir", "/host/opt/cni/bin", "the node's CNI binary directory, as mounted")
	fs.StringVar(&o.conflist, "conflist", "/etc/allot/cni/10-allot.conflist", "the conflist to install")
	fs.StringVar(&o.confDir, "conf-dir", "/host/etc/cni/net.d", "the node's CNI configuration directory, as mounted")
	logFlags := logfmt.RegisterFormat(fs)
	buildinfo.Flag(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	o.log, err = logFlags.Parse()
	return o, err
}

// install copies the plugin, then the conflist: a runtime that finds the
// conflist must find the plugin it names.
func install(o options) error {
	conf, err := os.ReadFile(o.conflist)
	if err != nil {
		return fmt.Errorf("read conflist: %w", err)
	}
	var list struct {
		Name    string            `json:"name"`
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(conf, &list); err != nil || list.Name == "" || len(list.Plugins) == 0 {
		return fmt.Errorf("conflist %s is not a CNI network configuration list (want name and plugins): %v", o.conflist, err)
	}
	plugin, err := os.ReadFile(o.plugin)
	if err != nil {
		return fmt.Errorf("read plugin: %w", err)
	}
	if err := writeAtomic(filepath.Join(o.binDir, filepath.Base(o.plugin)), plugin, 0o755); err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(o.confDir, filepath.Base(o.conflist)), conf, 0o644); err != nil {
		return err
	}
	return nil
}

func writeAtomic(dst string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".")
	if err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return nil
}
