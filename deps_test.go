// Package allot_test holds checks on the repository as a whole. The product
// binaries (allot-broker, allotctl, allot-agent, the CNI plugin allot and
// its installer allot-install-cni) must link none of the code that only
// tests and benchmarks need: package testing, the stand-in AWS, the
// benchmarks, the harnesses, the development certificate authority, and the
// fakes kept in packages whose name ends in "test".
package allot_test

import (
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/allotnet/allot"

// productDirs hold every product main; benchmark drivers and the simulator
// live elsewhere (bench/cmd, awssim/cmd, deploy/demo).
var productDirs = []string{"./broker/cmd/...", "./agent/cmd/...", "./cni/cmd/..."}

// wantBinaries must all be found, so that a move can't shrink what the
// check covers without the check noticing.
var wantBinaries = []string{"allot-broker", "allotctl", "allot-agent", "allot", "allot-install-cni"}

// forbidden says why a package must not be linked into a product binary, or
// "" if it may be.
func forbidden(pkg string) string {
	switch {
	case pkg == "testing" || strings.HasPrefix(pkg, "testing/"):
		return "the testing package"
	}
	rel, ok := strings.CutPrefix(pkg, module+"/")
	if !ok {
		return ""
	}
	elems := strings.Split(rel, "/")
	switch {
	case elems[0] == "awssim":
		return "the stand-in AWS"
	case elems[0] == "bench" || slices.Contains(elems, "bench"):
		return "a benchmark"
	case elems[0] == "deploy" || slices.Contains(elems, "e2e"):
		return "a test harness"
	case rel == "broker/auth/devca":
		return "the throwaway certificate authority of tests and the demo"
	case strings.HasSuffix(path.Base(rel), "test"):
		return "a test helper or fake"
	}
	return ""
}

func TestForbidden(t *testing.T) {
	for pkg, want := range map[string]bool{
		"testing":                                  true,
		"testing/fstest":                           true,
		"internal/synctest":                        false,
		"net/http/httptest":                        false, // links no testing
		module + "/awssim/ec2":                     true,
		module + "/bench/burst":                    true,
		module + "/bench/cmd/allot-burst":          true,
		module + "/broker/etcdembed/etcdembedtest": true,
		module + "/agent/hostnet/hostnettest":      true,
		module + "/internal/netnstest":             true,
		module + "/agent/e2e/harness":              true,
		module + "/deploy/cluster":                 true,
		module + "/broker/etcdembed":               false,
		module + "/agent/hostnet":                  false,
		module + "/proto/allot/v1":                 false,
		"github.com/mdlayher/netlink/nltest":       false, // another module's own business
	} {
		if got := forbidden(pkg) != ""; got != want {
			t.Errorf("forbidden(%q) = %q, want forbidden=%v", pkg, forbidden(pkg), want)
		}
	}
}

// TestProductBinariesLinkNoTestCode lists every product main and the
// transitive imports of each with `go list -deps`, and fails on any package
// forbidden names.
func TestProductBinariesLinkNoTestCode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the whole build graph")
	}
	out := goList(t, append([]string{"-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}, productDirs...)...)
	mains := strings.Fields(out)
	for _, want := range wantBinaries {
		if !slices.ContainsFunc(mains, func(m string) bool { return path.Base(m) == want }) {
			t.Errorf("no main package named %s under %v (found %v)", want, productDirs, mains)
		}
	}
	for _, m := range mains {
		deps := strings.Fields(goList(t, "-deps", "-f", "{{.ImportPath}}", m))
		if len(deps) < 10 {
			t.Fatalf("go list -deps %s listed only %v", m, deps)
		}
		for _, d := range deps {
			if why := forbidden(d); why != "" {
				t.Errorf("%s links %s, %s; product binaries must not (see docs/architecture.md, \"Testing\")", path.Base(m), d, why)
			}
		}
	}
}

func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list %v: %v\n%s", args, err, stderr)
	}
	return string(out)
}
