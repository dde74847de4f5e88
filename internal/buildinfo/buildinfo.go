// Package buildinfo says which build of allot a binary is: the module
// version, the commit and the build date. `make build` and `make images`
// stamp them with -ldflags -X; a plain `go build` or `go install` falls back
// to what the Go toolchain records in the binary.
package buildinfo

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set with -ldflags "-X github.com/allotnet/allot/internal/buildinfo.version=v0.3.0 ...".
// Empty means: take it from the toolchain's build information.
var (
	version string
	commit  string
	date    string
)

// Info is one build's identity.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

// Get returns this binary's build information. Fields nobody recorded are
// "unknown", never empty, so a support bundle or log line always has them.
func Get() Info {
	i := Info{Version: version, Commit: commit, Date: date, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Commit == "":
				i.Commit = s.Value
			case s.Key == "vcs.time" && i.Date == "":
				i.Date = s.Value
			}
		}
	}
	for _, f := range []*string{&i.Version, &i.Commit, &i.Date} {
		if *f == "" {
			*f = "unknown"
		}
	}
	return i
}

// String is the one line `--version` prints: "allot-agent v0.3.0 (commit
// 1a2b3c, built 2026-11-25T08:00:00Z, go1.26.0)".
func String(program string) string {
	i := Get()
	return fmt.Sprintf("%s %s (commit %s, built %s, %s)", program, i.Version, i.Commit, i.Date, i.Go)
}

// Flag registers --version on fs so it shows in -h; Requested decides it.
func Flag(fs *flag.FlagSet) {
	fs.Bool("version", false, "print the version, commit and build date, and exit")
}

// Requested reports whether args ask for the version. It is checked before
// the flag set is validated, so `allot-agent --version` answers without the
// flags the agent otherwise requires. It stops at the first argument that
// is not a flag, as the flag package does.
func Requested(args []string) bool {
	for _, a := range args {
		if a == "--" || !strings.HasPrefix(a, "-") {
			return false
		}
		switch strings.TrimLeft(a, "-") {
		case "version", "version=true", "version=1":
			return true
		}
	}
	return false
}

// PrintIfRequested writes the version line to w and reports true when args
// ask for it; mains then exit 0.
func PrintIfRequested(program string, args []string, w io.Writer) bool {
	if !Requested(args) {
		return false
	}
	fmt.Fprintln(w, String(program))
	return true
}
