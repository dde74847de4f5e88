package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/allotnet/allot/agent/e2e/harness"
)

// bins are the plugin and agent, built once for every test.
var bins *harness.Binaries

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 {
		// Every test needs namespaces and skips itself; nothing to build.
		return m.Run()
	}
	var err error
	if bins, err = harness.BuildBinaries(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer bins.Remove()
	return m.Run()
}
