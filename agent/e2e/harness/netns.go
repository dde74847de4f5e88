// Package harness builds the world allot's end-to-end tests and the CNI
// latency benchmark run in: real network namespaces for the node, the VPC and
// every pod; awssim playing EC2 and IMDS; the broker in-process (embedded
// etcd, engine, gRPC server); the allot plugin and agent binaries built from
// this tree; and a container runtime's side of CNI through libcni.
//
// Everything it creates is named allot-e2e-<run>-… and removed through
// t.Cleanup, also when a test fails.
package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/allotnet/allot/internal/netnstest"
)

// RunID tells this process's namespaces and files apart from anyone else's.
var RunID = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// Prefix starts the name of every namespace and temporary directory the
// harness creates.
var Prefix = "allot-e2e-" + RunID

var nsSeq atomic.Int64

// RequireRoot skips the test unless it can create network namespaces.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
}

// NetNS is a named network namespace the harness created.
type NetNS = netnstest.NS

// NewNetNS creates <Prefix>-<seq>-<role> with lo up and registers its
// deletion before anything else can fail.
func NewNetNS(t testing.TB, role string) *NetNS {
	t.Helper()
	ns, err := CreateNetNS(role)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return ns
}

// CreateNetNS creates a namespace without registering a cleanup; the caller
// must Delete it.
func CreateNetNS(role string) (*NetNS, error) {
	return netnstest.Create(fmt.Sprintf("%s-%d-%s", Prefix, nsSeq.Add(1), role))
}
