package auth

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Document is the part of an EC2 instance identity document the broker
// uses. Its bytes are signed by AWS; nothing in it is taken from the agent.
type Document struct {
	AccountID        string    `json:"accountId"`
	AvailabilityZone string    `json:"availabilityZone"`
	ImageID          string    `json:"imageId"`
	InstanceID       string    `json:"instanceId"`
	InstanceType     string    `json:"instanceType"`
	PendingTime      time.Time `json:"pendingTime"`
	PrivateIP        string    `json:"privateIp"`
	Region           string    `json:"region"`
}

// errBadDocument wraps every reason a document is not accepted as signed
// by AWS.
var errBadDocument = errors.New("instance identity document not verified")

// LoadCertificates reads the PEM certificates that verify identity
// documents: on AWS the region's public certificate for the "signature"
// form (AWS publishes one per region), against awssim the one it writes.
// Several may be given, to cover a rotation.
func LoadCertificates(path string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read identity certificate: %w", err)
	}
	return ParseCertificates(b)
}

// ParseCertificates parses PEM certificates with RSA keys.
func ParseCertificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("identity certificate: %w", err)
		}
		if _, ok := c.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fmt.Errorf("identity certificate %q: not an RSA key (want the certificate for the \"signature\" form)", c.Subject)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("identity certificate: no PEM certificate found")
	}
	return out, nil
}

// VerifyDocument checks sig, IMDS's base64 RSA-SHA256 "signature" of doc,
// against certs, and parses the document. Whitespace in sig (IMDS breaks
// it into lines) is ignored. The certificates are trusted as configured:
// as with AWS's own instructions, only their keys matter, not their
// validity dates or issuer.
func VerifyDocument(certs []*x509.Certificate, doc []byte, sig string) (Document, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(sig), ""))
	if err != nil {
		return Document{}, fmt.Errorf("%w: signature is not base64", errBadDocument)
	}
	sum := sha256.Sum256(doc)
	ok := false
	for _, c := range certs {
		if rsa.VerifyPKCS1v15(c.PublicKey.(*rsa.PublicKey), crypto.SHA256, sum[:], raw) == nil {
			ok = true
			break
		}
	}
	if !ok {
		return Document{}, fmt.Errorf("%w: signature does not match the document under the configured certificate", errBadDocument)
	}
	var d Document
	if err := json.Unmarshal(doc, &d); err != nil {
		return Document{}, fmt.Errorf("%w: signed but not a document: %v", errBadDocument, err)
	}
	if d.InstanceID == "" || d.AccountID == "" || d.Region == "" {
		return Document{}, fmt.Errorf("%w: signed but without instanceId, accountId or region", errBadDocument)
	}
	return d, nil
}
