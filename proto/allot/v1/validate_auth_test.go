package allotv1

import (
	"bytes"
	"strings"
	"testing"
)

// TestValidateQuotesShortPrefix: a huge bad value is named by a short
// prefix and its length, never echoed whole.
func TestValidateQuotesShortPrefix(t *testing.T) {
	huge := "i-" + strings.Repeat("z", 1<<20)
	for name, req := range map[string]interface{ Validate() error }{
		"heartbeat":     &HeartbeatRequest{InstanceId: huge},
		"report usage":  &ReportUsageRequest{InstanceId: "i-0123456789abcdef0", Assigned: []string{huge}},
		"register type": &RegisterRequest{Node: func() *NodeIdentity { n := goodNode(); n.InstanceType = huge; return n }()},
		"ack release":   &AckReleaseRequest{InstanceId: "i-0123456789abcdef0", ReleaseId: huge},
	} {
		err := req.Validate()
		if err == nil {
			t.Errorf("%s: a 1 MiB value is valid", name)
			continue
		}
		if n := len(err.Error()); n > 256 {
			t.Errorf("%s: error of %d bytes quotes too much: %.200s", name, n, err)
		}
		if !strings.Contains(err.Error(), "bytes)") {
			t.Errorf("%s: error %q does not give the value's length", name, err)
		}
	}
}

func TestValidateAttest(t *testing.T) {
	good := func() *AttestRequest {
		return &AttestRequest{
			Document: []byte(`{"instanceId":"i-0123456789abcdef0"}`), Signature: "c2ln",
			NodeKey: make([]byte, 32), Nonce: []byte("n"), NonceSignature: make([]byte, 64),
		}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good request: %v", err)
	}
	for name, tc := range map[string]struct {
		mod  func(*AttestRequest)
		want string
	}{
		"no document":   {func(r *AttestRequest) { r.Document = nil }, "document: 0 bytes"},
		"huge document": {func(r *AttestRequest) { r.Document = bytes.Repeat([]byte("x"), 1<<20) }, "document: 1048576 bytes"},
		"short key":     {func(r *AttestRequest) { r.NodeKey = r.NodeKey[:31] }, "node_key: 31 bytes, want exactly 32"},
		"no signature":  {func(r *AttestRequest) { r.Signature = "" }, "signature: 0 bytes"},
		"bad nonce sig": {func(r *AttestRequest) { r.NonceSignature = nil }, "nonce_signature: 0 bytes"},
		"huge nonce":    {func(r *AttestRequest) { r.Nonce = make([]byte, 1000) }, "nonce: 1000 bytes"},
	} {
		r := good()
		tc.mod(r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}
