package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Binding ties an instance to the node key that first attested it. A
// document is the same for the instance's whole life and anyone who once
// read it can present it again; the node key, which never leaves the node,
// is what a replay lacks.
type Binding struct {
	V          int    `json:"v"`
	InstanceID string `json:"instance_id"`
	Key        []byte `json:"key"`
	// PendingTime is the document's: when the instance last started.
	PendingTime time.Time `json:"pending_time"`
	BoundAt     time.Time `json:"bound_at"`
}

// Fingerprint names a node key in logs, errors and tokens: the first 16
// hex digits of its SHA-256.
func Fingerprint(key ed25519.PublicKey) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// decideBinding says which binding holds after cand attests, and whether it
// must be written. The first key wins. A different key replaces it only
// when the document shows the instance started again since the binding
// was made (a stopped and started instance may have lost its disk, and an
// old document cannot claim the new start).
func decideBinding(cur *Binding, cand Binding) (Binding, bool) {
	switch {
	case cur == nil:
		return cand, true
	case bytes.Equal(cur.Key, cand.Key):
		return *cur, false
	case cand.PendingTime.After(cur.PendingTime):
		return cand, true
	default:
		return *cur, false
	}
}
