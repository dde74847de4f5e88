package awssim_test

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

func imdsGet(t *testing.T, h *harness, c *imds.Client, path string) (string, bool) {
	t.Helper()
	out, err := c.GetMetadata(h.ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		if strings.Contains(err.Error(), "404") {
			return "", false
		}
		t.Fatalf("imds %s: %v", path, err)
	}
	defer out.Content.Close()
	b, _ := io.ReadAll(out.Content)
	return string(b), true
}

// TestIMDSLagsEC2: an assign and an attach show up in the instance's IMDS
// (read with the SDK's imds client, IMDSv2 tokens required) only after the
// lag; until then IMDS shows the old state.
func TestIMDSLagsEC2(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Disabled = true
	sc.IMDS.TokenRequired = true
	const lag = 30 * time.Second // 300 ms real at 100x
	h := start(t, awssim.Config{Scenario: sc, TimeScale: 100, IMDSLag: lag})
	inst := "i-0000000000000c5a1"
	url, err := h.sim.IMDSEndpoint(inst)
	if err != nil {
		t.Fatal(err)
	}
	// A plain GET without a token is refused in required mode.
	resp, err := http.Get(url + "/latest/meta-data/instance-id")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("IMDSv1 request: %d; want 401", resp.StatusCode)
	}
	c := imds.New(imds.Options{Endpoint: url})
	if id, _ := imdsGet(t, h, c, "instance-id"); id != inst {
		t.Fatalf("instance-id = %q", id)
	}
	w, _ := h.sim.World().Instance(inst)
	mac := w.MAC
	primaryIPs := "network/interfaces/macs/" + mac + "/local-ipv4s"
	if got, _ := imdsGet(t, h, c, primaryIPs); got != w.PrivateIP {
		t.Fatalf("local-ipv4s at launch = %q; want %q", got, w.PrivateIP)
	}
	out, err := h.assign(w.NetworkInterfaces[0].ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	eni := h.createENI(t, subnetA, 1)
	if _, err := h.attach(eni, inst, 1); err != nil {
		t.Fatal(err)
	}
	assignedAt := time.Now()
	// Right after: IMDS still shows the old state.
	if got, _ := imdsGet(t, h, c, primaryIPs); got != w.PrivateIP {
		t.Fatalf("local-ipv4s right after assign = %q; want the old %q", got, w.PrivateIP)
	}
	macs, _ := imdsGet(t, h, c, "network/interfaces/macs/")
	if len(strings.Fields(macs)) != 1 {
		t.Fatalf("macs right after attach = %q; want only the primary", macs)
	}
	if time.Since(assignedAt) > h.sim.Clock().Real(lag)/2 {
		t.Skip("machine too slow to observe the state before the lag passed")
	}
	h.waitSim(lag + time.Second)
	want := []string{w.PrivateIP, *out.AssignedPrivateIpAddresses[0].PrivateIpAddress, *out.AssignedPrivateIpAddresses[1].PrivateIpAddress}
	if got, _ := imdsGet(t, h, c, primaryIPs); !slices.Equal(strings.Split(got, "\n"), want) {
		t.Fatalf("local-ipv4s after lag = %q; want %v", got, want)
	}
	macs, _ = imdsGet(t, h, c, "network/interfaces/macs/")
	if len(strings.Fields(macs)) != 2 {
		t.Fatalf("macs after lag = %q; want two", macs)
	}
	e := h.describeENI(t, eni)
	if id, _ := imdsGet(t, h, c, "network/interfaces/macs/"+*e.MacAddress+"/interface-id"); id != eni {
		t.Fatalf("interface-id = %q; want %s", id, eni)
	}
	if dn, _ := imdsGet(t, h, c, "network/interfaces/macs/"+*e.MacAddress+"/device-number"); dn != "1" {
		t.Fatalf("device-number = %q", dn)
	}
	if _, found := imdsGet(t, h, c, "network/interfaces/macs/"+*e.MacAddress+"/ipv4-prefix"); found {
		t.Fatal("ipv4-prefix present for an ENI without prefixes; want 404")
	}
	// Removing the instance stops its IMDS.
	if _, err := h.ec2.DeleteNetworkInterface(h.ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)}); err == nil {
		t.Fatal("deleted an attached ENI")
	}
	if err := h.sim.RemoveInstance(inst); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sim.IMDSEndpoint(inst); err == nil {
		t.Fatal("IMDS endpoint of a removed instance still listed")
	}
}

// TestIMDSOutage: while an instance's IMDS is down its listener answers
// nothing (the SDK's client fails after its retries), other instances'
// IMDS is unaffected, and the same client reads again once it is back.
func TestIMDSOutage(t *testing.T) {
	sc := testScenario()
	sc.Throttle.Disabled = true
	sc.Instances = append(sc.Instances, scenario.Instance{ID: "i-0000000000000c5a2", Subnet: "b", Type: "c5.xlarge"})
	h := start(t, awssim.Config{Scenario: sc})
	var insts []string
	for _, in := range h.sim.World().Instances() {
		insts = append(insts, in.ID)
	}
	if len(insts) < 2 {
		t.Fatalf("scenario has %d instances, want two", len(insts))
	}
	clients := map[string]*imds.Client{}
	for _, id := range insts[:2] {
		url, err := h.sim.IMDSEndpoint(id)
		if err != nil {
			t.Fatal(err)
		}
		clients[id] = imds.New(imds.Options{Endpoint: url})
	}
	down, up := insts[0], insts[1]
	if err := h.sim.SetIMDSDown(down, true); err != nil {
		t.Fatal(err)
	}
	if _, err := clients[down].GetMetadata(h.ctx, &imds.GetMetadataInput{Path: "instance-id"}); err == nil {
		t.Fatal("IMDS answered during its outage")
	}
	if id, _ := imdsGet(t, h, clients[up], "instance-id"); id != up {
		t.Fatalf("the other instance's IMDS: %q", id)
	}
	if err := h.sim.SetIMDSDown(down, false); err != nil {
		t.Fatal(err)
	}
	if id, _ := imdsGet(t, h, clients[down], "instance-id"); id != down {
		t.Fatalf("after the outage: instance-id %q", id)
	}
	if err := h.sim.SetIMDSDown("i-00000000000000000", true); err == nil {
		t.Error("SetIMDSDown accepted an unknown instance")
	}
}
