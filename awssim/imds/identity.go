package imds

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"time"
)

// Signer signs instance identity documents the way EC2 does for the
// "signature" form: an RSA PKCS #1 v1.5 signature over the SHA-256 of the
// document's exact bytes, served base64-encoded. EC2 publishes one public
// certificate per region; a Signer plays that role for one simulated
// account, so a verifier configured with CertificatePEM checks documents
// from awssim exactly as it would check EC2's.
//
// The key is generated on first use: most tests never ask for a signature
// and need not pay for an RSA key.
type Signer struct {
	region string

	once    sync.Once
	err     error
	key     *rsa.PrivateKey
	certPEM []byte
}

// NewSigner returns a Signer whose certificate names region.
func NewSigner(region string) *Signer { return &Signer{region: region} }

func (s *Signer) init() error {
	s.once.Do(func() {
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			s.err = fmt.Errorf("generate identity signing key: %w", err)
			return
		}
		now := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(now.UnixNano()),
			Subject: pkix.Name{
				Organization: []string{"awssim"},
				CommonName:   "awssim instance identity " + s.region,
			},
			NotBefore:             now.Add(-time.Hour),
			NotAfter:              now.AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			s.err = fmt.Errorf("create identity certificate: %w", err)
			return
		}
		s.key = key
		s.certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return s.err
}

// CertificatePEM is the public certificate that verifies this Signer's
// signatures, PEM-encoded (the form AWS publishes per region).
func (s *Signer) CertificatePEM() ([]byte, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	return bytes.Clone(s.certPEM), nil
}

// Sign returns the base64 signature of doc, in lines of 64 characters as
// IMDS serves it.
func (s *Signer) Sign(doc []byte) (string, error) {
	if err := s.init(); err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign identity document: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString(sig)
	var b bytes.Buffer
	for len(enc) > 64 {
		b.WriteString(enc[:64])
		b.WriteByte('\n')
		enc = enc[64:]
	}
	b.WriteString(enc)
	return b.String(), nil
}

// identityDoc is the instance identity document with EC2's fields, in
// EC2's order. Fields EC2 fills only for marketplace or paravirtual
// instances are null, as EC2 serves them.
type identityDoc struct {
	AccountID               string    `json:"accountId"`
	Architecture            string    `json:"architecture"`
	AvailabilityZone        string    `json:"availabilityZone"`
	BillingProducts         *[]string `json:"billingProducts"`
	DevpayProductCodes      *[]string `json:"devpayProductCodes"`
	MarketplaceProductCodes *[]string `json:"marketplaceProductCodes"`
	ImageID                 string    `json:"imageId"`
	InstanceID              string    `json:"instanceId"`
	InstanceType            string    `json:"instanceType"`
	KernelID                *string   `json:"kernelId"`
	PendingTime             string    `json:"pendingTime,omitempty"`
	PrivateIP               string    `json:"privateIp"`
	RamdiskID               *string   `json:"ramdiskId"`
	Region                  string    `json:"region"`
	Version                 string    `json:"version"`
}

// identityDocument renders md's instance identity document. It depends
// only on what is fixed for the life of an instance, so its bytes (and the
// signature over them) are the same on every request, as on EC2.
func identityDocument(md Metadata) string {
	pending := ""
	if !md.PendingTime.IsZero() {
		pending = md.PendingTime.UTC().Format(time.RFC3339)
	}
	b, _ := json.MarshalIndent(identityDoc{
		AccountID:        md.AccountID,
		Architecture:     "x86_64",
		AvailabilityZone: md.AvailabilityZone,
		ImageID:          md.ImageID,
		InstanceID:       md.InstanceID,
		InstanceType:     md.InstanceType,
		PendingTime:      pending,
		PrivateIP:        md.LocalIPv4,
		Region:           regionOf(md.AvailabilityZone),
		Version:          "2017-09-30",
	}, "", "  ")
	return string(b)
}
