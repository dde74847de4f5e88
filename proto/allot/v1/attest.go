package allotv1

import "crypto/sha256"

// AttestMessage is what an agent's node key signs in an AttestRequest
// (nonce_signature): a context string, the challenge nonce and the SHA-256
// of the identity document, so the signature answers this challenge for
// this document only. Written by hand; both sides use it.
func AttestMessage(nonce, document []byte) []byte {
	sum := sha256.Sum256(document)
	msg := make([]byte, 0, 16+len(nonce)+len(sum))
	msg = append(msg, "allot-attest-v1\n"...)
	msg = append(msg, nonce...)
	return append(msg, sum[:]...)
}
