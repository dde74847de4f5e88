package cluster

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/allotnet/allot/awssim/scenario"
)

// TestCustomNetworkingLayoutIsTheShippedScenario keeps the harness's
// custom-networking VPC the one deploy/awssim/custom-networking.yaml
// describes, which awssim's own data-plane test runs.
func TestCustomNetworkingLayoutIsTheShippedScenario(t *testing.T) {
	sc, err := scenario.Load(filepath.Join(filepath.Dir(conflistPath(t)), "..", "awssim", "custom-networking.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.VPCs) != 1 {
		t.Fatalf("scenario file has %d VPCs, want 1", len(sc.VPCs))
	}
	want, got := sc.VPCs[0], customNetworkingVPC()
	if !slices.Equal(got.CIDRs, want.CIDRs) {
		t.Errorf("CIDRs %v, the file has %v", got.CIDRs, want.CIDRs)
	}
	if !reflect.DeepEqual(got.Subnets, want.Subnets) {
		t.Errorf("subnets\n %+v\nthe file has\n %+v", got.Subnets, want.Subnets)
	}
}
