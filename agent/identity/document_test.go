package identity

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/allotnet/allot/awssim/imds"
	"github.com/allotnet/allot/broker/auth"
)

// TestFetchSignedDocument: the document and signature the agent reads
// through the SDK's IMDS client verify, byte for byte, with the broker's
// verifier and the signer's certificate; an IMDS that offers no signature
// is ErrNotFound, not an empty proof.
func TestFetchSignedDocument(t *testing.T) {
	w := world()
	w.edit(func(md *imds.Metadata) { md.AccountID = "123456789012" })
	signer := imds.NewSigner("eu-west-1")
	srv := httptest.NewServer(imds.NewHandler(w.md.InstanceID, w, imds.Options{TokenRequired: true, Signer: signer}))
	defer srv.Close()
	c, err := NewClient(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := FetchSignedDocument(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := signer.CertificatePEM()
	if err != nil {
		t.Fatal(err)
	}
	certs, err := auth.ParseCertificates(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := auth.VerifyDocument(certs, sd.Document, sd.Signature)
	if err != nil {
		t.Fatalf("verify what the agent read: %v", err)
	}
	if doc.InstanceID != "i-0abc" || doc.Region != "eu-west-1" || doc.InstanceType != "c5.xlarge" {
		t.Fatalf("document %+v", doc)
	}

	unsigned := httptest.NewServer(imds.NewHandler(w.md.InstanceID, w, imds.Options{}))
	defer unsigned.Close()
	c2, _ := NewClient(unsigned.URL)
	if _, err := FetchSignedDocument(context.Background(), c2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("IMDS without a signature: %v, want ErrNotFound", err)
	}
}
