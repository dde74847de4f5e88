package awssim_test

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/allotnet/allot/awssim"
	"github.com/allotnet/allot/awssim/scenario"
)

func dynamicGet(t *testing.T, h *harness, c *imds.Client, path string) []byte {
	t.Helper()
	out, err := c.GetDynamicData(h.ctx, &imds.GetDynamicDataInput{Path: path})
	if err != nil {
		t.Fatalf("imds dynamic/%s: %v", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(out.Content)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyWith checks sig (IMDS's base64 "signature" form) over doc with the
// certificate in certPEM, as a verifier of EC2's documents does.
func verifyWith(t *testing.T, certPEM, doc, sig []byte) error {
	t.Helper()
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		t.Fatalf("identity certificate is not PEM: %q", certPEM)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(sig)), ""))
	if err != nil {
		t.Fatalf("signature is not base64: %v", err)
	}
	sum := sha256.Sum256(doc)
	return rsa.VerifyPKCS1v15(cert.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], raw)
}

// TestIdentityDocumentSigned: every instance's identity document, read
// through the SDK's IMDS client, carries EC2's fields, stays byte-for-byte
// the same over the instance's life, and its signature verifies against
// the certificate the admin API serves; a document altered in one byte, or
// another instance's signature, does not verify.
func TestIdentityDocumentSigned(t *testing.T) {
	sc := testScenario()
	sc.AccountID = "123456789012"
	sc.Region = "us-east-1"
	sc.Throttle.Disabled = true
	sc.IMDS.TokenRequired = true
	sc.Instances = append(sc.Instances, scenario.Instance{ID: "i-0000000000000c5a2", Subnet: "b", Type: "m5.large"})
	h := start(t, awssim.Config{Scenario: sc, IMDSLag: -1})

	resp, err := http.Get(h.sim.AdminEndpoint() + "/v1/identity-certificate")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET identity-certificate: %d %s", resp.StatusCode, certPEM)
	}

	read := func(id string) (*imds.Client, []byte, []byte) {
		url, err := h.sim.IMDSEndpoint(id)
		if err != nil {
			t.Fatal(err)
		}
		c := imds.New(imds.Options{Endpoint: url, EnableFallback: aws.FalseTernary})
		return c, dynamicGet(t, h, c, "instance-identity/document"), dynamicGet(t, h, c, "instance-identity/signature")
	}
	c1, doc1, sig1 := read("i-0000000000000c5a1")
	_, doc2, sig2 := read("i-0000000000000c5a2")

	var fields map[string]any
	if err := json.Unmarshal(doc1, &fields); err != nil {
		t.Fatalf("document is not JSON: %v\n%s", err, doc1)
	}
	inst, _ := h.sim.World().Instance("i-0000000000000c5a1")
	for k, want := range map[string]string{
		"accountId": "123456789012", "instanceId": inst.ID, "instanceType": "c5.xlarge",
		"availabilityZone": "us-east-1a", "region": "us-east-1", "privateIp": inst.PrivateIP,
		"imageId": inst.ImageID,
	} {
		if fields[k] != want {
			t.Errorf("document %s = %v, want %q", k, fields[k], want)
		}
	}
	if _, ok := fields["pendingTime"].(string); !ok {
		t.Errorf("document has no pendingTime: %s", doc1)
	}
	// The SDK's own reader understands it.
	iid, err := c1.GetInstanceIdentityDocument(h.ctx, nil)
	if err != nil || iid.InstanceID != inst.ID || iid.AccountID != "123456789012" {
		t.Fatalf("GetInstanceIdentityDocument: %+v, %v", iid, err)
	}

	if err := verifyWith(t, certPEM, doc1, sig1); err != nil {
		t.Fatalf("instance 1's signature does not verify: %v", err)
	}
	if err := verifyWith(t, certPEM, doc2, sig2); err != nil {
		t.Fatalf("instance 2's signature does not verify: %v", err)
	}
	if err := verifyWith(t, certPEM, doc1, sig2); err == nil {
		t.Fatal("instance 2's signature verifies instance 1's document")
	}
	tampered := []byte(strings.Replace(string(doc1), "c5.xlarge", "c5.xlargf", 1))
	if err := verifyWith(t, certPEM, tampered, sig1); err == nil {
		t.Fatal("an altered document verifies")
	}

	// A change to the instance's network does not change its document.
	eni, err := h.ec2.CreateNetworkInterface(h.ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnetA)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.ec2.AttachNetworkInterface(h.ctx, &ec2.AttachNetworkInterfaceInput{
		NetworkInterfaceId: eni.NetworkInterface.NetworkInterfaceId, InstanceId: aws.String(inst.ID), DeviceIndex: aws.Int32(1),
	}); err != nil {
		t.Fatal(err)
	}
	_, again, sigAgain := read(inst.ID)
	if string(again) != string(doc1) {
		t.Fatalf("document changed after an attach:\n%s\nthen\n%s", doc1, again)
	}
	if err := verifyWith(t, certPEM, again, sigAgain); err != nil {
		t.Fatalf("signature after an attach: %v", err)
	}
}
