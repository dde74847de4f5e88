package introspect

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// The repair token guards POST /v1/repair. Loopback alone does not say who
// calls: every process on the node, and every hostNetwork pod, reaches the
// introspection address. The token lives in a file only root can read
// (the agent's state directory on the host), so only the node's operator —
// allotctl run as root on the node — can ask the agent to change the host's
// devices. Reads stay open, as aws-vpc-cni's introspection is.

// repairTokenBytes is the token's length before hex encoding.
const repairTokenBytes = 32

// LoadOrCreateRepairToken returns the token in path, creating the file
// (mode 0600) with a new random token when it does not exist. Agents that
// share a host and a path share the token; a restart keeps it. A file
// others may read, or one that does not hold a token, is refused: the
// route would then be guarded by a secret that is not one.
func LoadOrCreateRepairToken(path string) (string, error) {
	tok, err := readRepairToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	b := make([]byte, repairTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("repair token: %w", err)
	}
	tok = hex.EncodeToString(b)
	// Written whole to a temp file, then linked into place: the name
	// appears with its token in it, never empty, and a link never
	// replaces a token another agent put there first.
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return "", fmt.Errorf("create repair token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(tok + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write repair token %s: %w", path, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readRepairToken(path) // another agent on this host made it first
	} else if err != nil {
		return "", fmt.Errorf("create repair token: %w", err)
	}
	return tok, nil
}

func readRepairToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("repair token: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("repair token: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("repair token %s is open to others (mode %04o): chmod 600 it, or delete it and restart the agent",
			path, st.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, 4*repairTokenBytes))
	if err != nil {
		return "", fmt.Errorf("repair token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if raw, err := hex.DecodeString(tok); err != nil || len(raw) != repairTokenBytes {
		return "", fmt.Errorf("repair token %s does not hold %d hex-encoded bytes: delete it and restart the agent", path, repairTokenBytes)
	}
	return tok, nil
}

// repairAllowed answers the request itself and returns false unless it
// carries want. An empty want turns the route off.
func repairAllowed(w http.ResponseWriter, r *http.Request, want string) bool {
	if want == "" {
		writeJSON(w, http.StatusForbidden, RepairReport{Restored: []string{},
			Error: "repair is off: the agent was started without a repair token file (--repair-token-file)"})
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="allot-agent repair"`)
		writeJSON(w, http.StatusUnauthorized, RepairReport{Restored: []string{},
			Error: "repair needs the agent's repair token (allotctl --agent-token-file, readable by root on the node)"})
		return false
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		writeJSON(w, http.StatusForbidden, RepairReport{Restored: []string{}, Error: "wrong repair token"})
		return false
	}
	return true
}
