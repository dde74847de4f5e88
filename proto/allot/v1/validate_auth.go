package allotv1

import "fmt"

// Sizes an attestation may not exceed. EC2's identity document is under
// 1 KiB and its base64 signature under 400 bytes; the limits leave room
// and still keep a hostile request small.
const (
	maxIdentityDocument  = 8 << 10
	maxIdentitySignature = 4 << 10
	nodeKeySize          = 32 // Ed25519 public key
	nodeSigSize          = 64 // Ed25519 signature
	maxNonce             = 256
)

// Validate accepts every challenge request; it has no fields.
func (x *ChallengeRequest) Validate() error { return nil }

// Validate checks an attestation's sizes; what the bytes prove is the
// broker's to judge.
func (x *AttestRequest) Validate() error {
	checks := []struct {
		field     string
		n, lo, hi int
	}{
		{"document", len(x.GetDocument()), 1, maxIdentityDocument},
		{"signature", len(x.GetSignature()), 1, maxIdentitySignature},
		{"node_key", len(x.GetNodeKey()), nodeKeySize, nodeKeySize},
		{"nonce", len(x.GetNonce()), 1, maxNonce},
		{"nonce_signature", len(x.GetNonceSignature()), nodeSigSize, nodeSigSize},
	}
	for _, c := range checks {
		if c.n < c.lo || c.n > c.hi {
			want := fmt.Sprintf("%d to %d bytes", c.lo, c.hi)
			if c.lo == c.hi {
				want = fmt.Sprintf("exactly %d bytes", c.lo)
			}
			return fieldErr(c.field, "%d bytes, want %s", c.n, want)
		}
	}
	return nil
}
