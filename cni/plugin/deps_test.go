package plugin_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestPluginLinksNoHeavyPackages: the plugin binary is executed for every
// pod, and every package it links is initialised on every exec, traced or
// not. It talks to the agent on its own wire and hands its spans to the
// agent to export, so it must link neither gRPC, the OpenTelemetry SDK,
// allot's generated API (whose package brings gRPC and every service's
// descriptors), TLS and X.509 (an exporter's), crypto/rand (its IDs and
// names need to be unique, not secret), nor protobuf's own packages (whose
// wire package reads the executable at start-up; internal/pbwire does the
// little the plugin needs), nor the CNI library (cni/cnispec speaks the
// protocol; the library's types link net, which alone makes a cgo build of
// the plugin a dynamically linked executable, and regexp, which compiles
// its pattern at start-up).
func TestPluginLinksNoHeavyPackages(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/allotnet/allot/cni/cmd/allot").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{"google.golang.org/grpc", "go.opentelemetry.io/", "github.com/allotnet/allot/proto/", "net/http",
		"crypto/tls", "crypto/x509", "crypto/rand", "google.golang.org/protobuf/", "golang.org/x/net/",
		"github.com/containernetworking/"}
	// These alone, not the packages under them (net/netip is light).
	exact := []string{"net", "regexp", "os/user", "runtime/cgo"}
	for _, dep := range strings.Fields(string(out)) {
		if slices.Contains(exact, dep) {
			t.Errorf("the plugin links %s", dep)
		}
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") || strings.HasPrefix(dep, b) && strings.HasSuffix(b, "/") {
				t.Errorf("the plugin links %s", dep)
			}
		}
	}
}
