package introspect

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// repairCounter counts the repairs it was asked for.
type repairCounter struct {
	fakeSource
	mu sync.Mutex
	n  int
}

func (r *repairCounter) RepairHost() RepairReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return r.fakeSource.RepairHost()
}

func postRepair(base, tok string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/repair", nil)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return http.DefaultClient.Do(req)
}

// TestRepairNeedsTheToken: a caller on loopback without the token, or with
// a wrong one, changes nothing and is told why; with it, the repair runs.
// An agent without a token file serves no repair at all.
func TestRepairNeedsTheToken(t *testing.T) {
	src := &repairCounter{}
	base := serve(t, src, nil)
	for _, c := range []struct {
		tok  string
		code int
		says string
	}{
		{"", http.StatusUnauthorized, "needs the agent's repair token"},
		{strings.Repeat("0", len(testToken)), http.StatusForbidden, "wrong repair token"},
		{testToken[:10], http.StatusForbidden, "wrong repair token"},
	} {
		resp, err := postRepair(base, c.tok)
		if err != nil {
			t.Fatal(err)
		}
		var rep RepairReport
		_ = json.NewDecoder(resp.Body).Decode(&rep)
		resp.Body.Close()
		if resp.StatusCode != c.code || !strings.Contains(rep.Error, c.says) {
			t.Errorf("token %q: %s %q, want %d %q", c.tok, resp.Status, rep.Error, c.code, c.says)
		}
	}
	if src.n != 0 {
		t.Fatalf("%d repairs ran for callers without the token", src.n)
	}
	resp, err := postRepair(base, testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || src.n != 1 {
		t.Errorf("with the token: %s, %d repairs", resp.Status, src.n)
	}

	off := serveWithToken(t, src, nil, "")
	resp, err = postRepair(off, testToken)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || src.n != 1 {
		t.Errorf("repair off: %s, %d repairs", resp.Status, src.n)
	}
}

// TestRepairTokenFile: the agent creates the file 0600 once and reads the
// same token back (a restart, a second agent on the host); a file others
// can read, or one without a token, is refused with a clear error.
func TestRepairTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "repair-token")
	tok, err := LoadOrCreateRepairToken(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || len(tok) != 2*repairTokenBytes {
		t.Fatalf("token file: %v %v, token %q", st.Mode(), err, tok)
	}
	again, err := LoadOrCreateRepairToken(path)
	if err != nil || again != tok {
		t.Fatalf("second load: %q %v, want %q", again, err, tok)
	}
	if read, err := readRepairToken(path); err != nil || read != tok {
		t.Fatalf("ReadRepairToken: %q %v", read, err)
	}
	other, err := LoadOrCreateRepairToken(filepath.Join(dir, "other"))
	if err != nil || other == tok {
		t.Fatalf("a second file got %q (%v), the same as the first", other, err)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateRepairToken(path); err == nil || !strings.Contains(err.Error(), "open to others") {
		t.Errorf("world-readable token file: %v", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateRepairToken(bad); err == nil || !strings.Contains(err.Error(), "does not hold") {
		t.Errorf("token file without a token: %v", err)
	}
	if _, err := readRepairToken(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadRepairToken of a missing file succeeded")
	}
}

// TestRepairTokenRace: agents starting together on one host with one token
// file all get the same token; none reads a file not yet written.
func TestRepairTokenRace(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "repair-token")
		const agents = 8
		toks := make([]string, agents)
		errs := make([]error, agents)
		var wg sync.WaitGroup
		for i := range agents {
			wg.Go(func() { toks[i], errs[i] = LoadOrCreateRepairToken(path) })
		}
		wg.Wait()
		for i := range agents {
			if errs[i] != nil || toks[i] != toks[0] {
				t.Fatalf("round %d, agent %d: %q %v; agent 0 got %q", round, i, toks[i], errs[i], toks[0])
			}
		}
		if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
			t.Fatalf("round %d: %d files beside the token, want it alone", round, len(entries))
		}
	}
}
