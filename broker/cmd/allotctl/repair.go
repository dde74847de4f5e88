package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/allotnet/allot/internal/supportbundle"
)

// fix is what --repair does, or would do, about one finding.
type fix struct {
	// Fix names the repair; By is who carries it out (an agent address,
	// or "reconciler" for what the leader's reconciler does on its own).
	Fix     string `json:"fix"`
	Class   string `json:"class"`
	By      string `json:"by"`
	Subject string `json:"subject"`
	Applied bool   `json:"applied"`
	Result  string `json:"result,omitempty"`
}

// The safe fixes --repair applies, by finding class. Each makes the host
// match the agent's own records and frees no address: an address is only
// ever freed by its owner's recorded release.
var agentFixes = map[string]string{
	"pod-without-devices": "restore-pod-devices",  // set the recorded pod's devices up again, if its netns exists
	"devices-without-pod": "remove-stray-devices", // delete our veth, rules and routes no record accounts for
}

// reconcilerFixes are findings the leader's reconciler repairs by itself,
// with the evidence it requires; --repair names them and leaves them.
var reconcilerFixes = map[string]string{
	"leaked-eni": "collect-leaked-eni (deleted once seen available with our tags twice and re-checked)",
}

// planFixes lists the fix of every finding that has a safe one.
func planFixes(findings []finding) []fix {
	var out []fix
	for _, f := range findings {
		subject := f.Attachment
		if subject == "" {
			subject = f.Detail
		}
		if name, ok := agentFixes[f.Class]; ok && strings.HasPrefix(f.Source, "agent ") {
			out = append(out, fix{Fix: name, Class: f.Class, By: strings.TrimPrefix(f.Source, "agent "), Subject: subject})
		} else if name, ok := reconcilerFixes[f.Class]; ok {
			out = append(out, fix{Fix: name, Class: f.Class, By: "reconciler", Subject: f.ENIID})
		}
	}
	return out
}

// agentRepair is the part of an agent's POST /v1/repair answer read here.
type agentRepair struct {
	Restored []string `json:"restored"`
	Removed  int      `json:"removed"`
	Error    string   `json:"error"`
}

// applyFixes asks each agent with a fix to repair its host once, showing
// the repair token in tokenFile, and records the outcome on its fixes. The
// reconciler's are left to it.
func applyFixes(ctx context.Context, fixes []fix, tokenFile string) {
	tok, tokErr := readToken(tokenFile)
	done := map[string]string{}
	for i := range fixes {
		f := &fixes[i]
		if f.By == "reconciler" {
			f.Result = "left to the leader's reconciler"
			continue
		}
		if _, ok := done[f.By]; !ok && tokErr != nil {
			done[f.By] = "failed: " + tokErr.Error()
		} else if !ok {
			done[f.By] = repairAgent(ctx, f.By, tok)
		}
		f.Result = done[f.By]
		f.Applied = !strings.HasPrefix(f.Result, "failed")
	}
}

// readToken reads the agents' repair token.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the agents' repair token (run allotctl as root on the node, "+
			"or pass --agent-token-file): %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the repair token file %s is empty", path)
	}
	return tok, nil
}

func repairAgent(ctx context.Context, addr, tok string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, supportbundle.AgentURL(addr, "/v1/repair"), nil)
	if err != nil {
		return fmt.Sprintf("failed: agent address %q: %v", addr, err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Sprintf("failed: ask the agent: %v", err)
	}
	defer resp.Body.Close()
	var rep agentRepair
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&rep); err != nil {
		return fmt.Sprintf("failed: POST /v1/repair: %s: %v", resp.Status, err)
	}
	if rep.Error != "" {
		return "failed: " + rep.Error
	}
	return fmt.Sprintf("agent restored %d pods' devices, removed %d stray pieces", len(rep.Restored), rep.Removed)
}

// printFixes writes the fixes under the check's table.
func printFixes(out io.Writer, fixes []fix, dryRun bool) error {
	if len(fixes) == 0 {
		_, err := fmt.Fprintln(out, "\nno finding has a safe automatic fix")
		return err
	}
	head := "\nfixes applied (the check above ran after them):"
	if dryRun {
		head = "\nfixes --repair would apply (dry run; add --dry-run=false to apply):"
	}
	if _, err := fmt.Fprintln(out, head); err != nil {
		return err
	}
	t := newTable(out, "FIX", "CLASS", "BY", "SUBJECT", "RESULT")
	for _, f := range fixes {
		t.row(f.Fix, f.Class, f.By, f.Subject, f.Result)
	}
	return t.flush()
}
