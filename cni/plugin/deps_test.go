package plugin_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPluginLinksNoHeavyPackages: the plugin binary is executed for every
// pod, and every package it links is initialised on every exec, traced or
// not. It talks to the agent on its own wire and exports spans with its
// own small exporter, so it must link neither gRPC, the OpenTelemetry SDK
// nor allot's generated API (whose package brings gRPC and every service's
// descriptors).
func TestPluginLinksNoHeavyPackages(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "github.com/allotnet/allot/cni/cmd/allot").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{"google.golang.org/grpc", "go.opentelemetry.io/", "github.com/allotnet/allot/proto/", "net/http"}
	for _, dep := range strings.Fields(string(out)) {
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") || strings.HasPrefix(dep, b) && strings.HasSuffix(b, "/") {
				t.Errorf("the plugin links %s", dep)
			}
		}
	}
}
