package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/allotnet/allot/internal/supportbundle"
	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// Classes allotctl adds by comparing each agent's pool with the broker's
// ENI records.
const (
	classAgentUnknownENI     = "agent-unknown-eni"
	classAgentUnknownAddress = "agent-unknown-address"
	classAgentMissingAddress = "agent-missing-address"
	classAgentUnreachable    = "agent-unreachable"
)

var (
	checkStaleAfter time.Duration
	checkAgents     string
	checkRepair     bool
	checkDryRun     bool
	checkTokenFile  string
)

func checkFlags(fs *flag.FlagSet) {
	fs.DurationVar(&checkStaleAfter, "stale-after", 10*time.Minute,
		"report intents open, and agents' usage reports unchanged, for longer than this")
	fs.StringVar(&checkAgents, "agents", "", "comma-separated introspection addresses of agents to include "+
		"(host:port of each agent's --introspect-addr, e.g. 127.0.0.1:61679 on a node)")
	fs.BoolVar(&checkRepair, "repair", false, "list the safe fix of each finding that has one (restore a recorded pod's host devices, "+
		"remove devices no record accounts for); with --dry-run=false, apply them and check again. No address is ever freed")
	fs.BoolVar(&checkDryRun, "dry-run", true, "with --repair: only list the fixes")
	fs.StringVar(&checkTokenFile, "agent-token-file", "/var/lib/allot/repair-token",
		"with --repair --dry-run=false: the agents' repair token file (the agent's --repair-token-file, readable by root on the node)")
}

// finding is one row of the check's output.
type finding struct {
	Class      string `json:"class"`
	Source     string `json:"source"`
	InstanceID string `json:"instance_id,omitempty"`
	ENIID      string `json:"eni_id,omitempty"`
	SubnetID   string `json:"subnet_id,omitempty"`
	Address    string `json:"address,omitempty"`
	Attachment string `json:"attachment,omitempty"`
	Detail     string `json:"detail"`
}

type checkResult struct {
	Replica    string    `json:"replica"`
	ENIsInEC2  int32     `json:"enis_in_ec2"`
	ENIsInEtcd int32     `json:"enis_in_etcd"`
	Agents     int       `json:"agents"`
	Findings   []finding `json:"findings"`
	// Fixes are --repair's, applied or (dry run) not.
	Fixes []fix `json:"fixes,omitempty"`
}

// findingsError is a check that ran and found disagreements (exit 3).
type findingsError struct{ n int }

func (e findingsError) Error() string { return fmt.Sprintf("%d disagreements found", e.n) }

func cmdCheck(ctx context.Context, c *client, args []string, o *options, out io.Writer) error {
	if err := wantArgs(args, 0, "no arguments"); err != nil {
		return err
	}
	if checkStaleAfter < 0 {
		return usageError{"--stale-after must not be negative"}
	}
	res, err := runCheck(ctx, c)
	if err != nil {
		return err
	}
	if checkRepair {
		fixes := planFixes(res.Findings)
		if !checkDryRun && len(fixes) > 0 {
			applyFixes(ctx, fixes, checkTokenFile)
			if res, err = runCheck(ctx, c); err != nil {
				return err
			}
		}
		res.Fixes = fixes
	}
	if err := printCheck(out, o, res); err != nil {
		return err
	}
	if checkRepair && o.output != "json" {
		if err := printFixes(out, res.Fixes, checkDryRun); err != nil {
			return err
		}
	}
	if len(res.Findings) > 0 {
		return findingsError{len(res.Findings)}
	}
	return nil
}

// runCheck asks the broker for its comparison and each agent for its own,
// and compares each agent's pool with the broker's records.
func runCheck(ctx context.Context, c *client) (checkResult, error) {
	resp, err := c.admin.Check(ctx, &allotv1.CheckRequest{StaleAfterSeconds: int64(checkStaleAfter / time.Second)})
	if err != nil {
		return checkResult{}, err
	}
	res := checkResult{Replica: resp.GetReplica(), ENIsInEC2: resp.GetEnisInEc2(), ENIsInEtcd: resp.GetEnisInEtcd(),
		Findings: []finding{}}
	for _, f := range resp.GetFindings() {
		res.Findings = append(res.Findings, finding{Class: f.GetClass(), Source: "broker", InstanceID: f.GetInstanceId(),
			ENIID: f.GetEniId(), SubnetID: f.GetSubnetId(), Address: f.GetAddress(), Detail: f.GetDetail()})
	}
	if agents := splitComma(checkAgents); len(agents) > 0 {
		enis, err := c.admin.ListENIs(ctx, &allotv1.ListENIsRequest{})
		if err != nil {
			return checkResult{}, err
		}
		res.Agents = len(agents)
		for _, addr := range agents {
			res.Findings = append(res.Findings, checkAgent(ctx, addr, enis.GetEnis())...)
		}
	}
	sort.SliceStable(res.Findings, func(i, j int) bool { return res.Findings[i].Class < res.Findings[j].Class })
	return res, nil
}

func printCheck(out io.Writer, o *options, res checkResult) error {
	if o.output == "json" {
		return writeJSON(out, res)
	}
	if len(res.Findings) == 0 {
		_, err := fmt.Fprintf(out, "clean: EC2, etcd (%d ENI records, %d ENIs tagged in EC2) and %d agents agree\n",
			res.ENIsInEtcd, res.ENIsInEC2, res.Agents)
		return err
	}
	t := newTable(out, "CLASS", "SOURCE", "INSTANCE", "ENI", "ADDRESS", "DETAIL")
	for _, f := range res.Findings {
		addr := f.Address
		if addr == "" {
			addr = f.Attachment
		}
		t.row(f.Class, f.Source, f.InstanceID, f.ENIID, addr, f.Detail)
	}
	return t.flush()
}

// agentENI and agentCheck are the parts of an agent's /v1/enis and
// /v1/check that the check reads.
type agentENI struct {
	ID        string `json:"id"`
	Addresses []struct {
		Addr   string `json:"addr"`
		Prefix string `json:"prefix"`
	} `json:"addresses"`
}

type agentCheck struct {
	Findings []struct {
		Class      string `json:"class"`
		Attachment string `json:"attachment"`
		Addr       string `json:"addr"`
		HostVeth   string `json:"hostVeth"`
		Detail     string `json:"detail"`
	} `json:"findings"`
	Error string `json:"error"`
}

// checkAgent reads one agent's own comparison of its records with the
// host's devices, and compares its pool with the broker's ENI records.
func checkAgent(ctx context.Context, addr string, records []*allotv1.NodeENI) []finding {
	src := "agent " + addr
	var chk agentCheck
	var pool []agentENI
	for path, v := range map[string]any{"/v1/check": &chk, "/v1/enis": &pool} {
		if err := getAgent(ctx, addr, path, v); err != nil {
			return []finding{{Class: classAgentUnreachable, Source: src, Detail: err.Error()}}
		}
	}
	var out []finding
	if chk.Error != "" {
		out = append(out, finding{Class: classAgentUnreachable, Source: src, Detail: chk.Error})
	}
	for _, f := range chk.Findings {
		out = append(out, finding{Class: f.Class, Source: src, Address: f.Addr, Attachment: f.Attachment, Detail: f.Detail})
	}
	byID := map[string]*allotv1.NodeENI{}
	for _, r := range records {
		byID[r.GetEni().GetEniId()] = r
	}
	for _, e := range pool {
		rec, ok := byID[e.ID]
		if !ok {
			out = append(out, finding{Class: classAgentUnknownENI, Source: src, ENIID: e.ID,
				Detail: "the agent's pool holds an ENI the broker has no record of"})
			continue
		}
		out = append(out, comparePool(src, e, rec)...)
	}
	return out
}

func comparePool(src string, e agentENI, rec *allotv1.NodeENI) []finding {
	recorded := map[string]bool{}
	for _, a := range append(append([]string(nil), rec.GetEni().GetAddresses()...), rec.GetEni().GetPrefixes()...) {
		recorded[a] = true
	}
	held := map[string]bool{}
	var out []finding
	for _, a := range e.Addresses {
		key := a.Addr
		if a.Prefix != "" {
			key = a.Prefix
		}
		held[key] = true
		if !recorded[key] {
			out = append(out, finding{Class: classAgentUnknownAddress, Source: src, InstanceID: rec.GetInstanceId(),
				ENIID: e.ID, Address: key, Detail: "in the agent's pool; the broker's record of the ENI does not hold it"})
		}
	}
	for a := range recorded {
		if !held[a] {
			out = append(out, finding{Class: classAgentMissingAddress, Source: src, InstanceID: rec.GetInstanceId(),
				ENIID: e.ID, Address: a, Detail: "the broker records it on the ENI; the agent's pool does not hold it"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

func getAgent(ctx context.Context, addr, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, supportbundle.AgentURL(addr, path), nil)
	if err != nil {
		return fmt.Errorf("agent address %q: %w", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the agent: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
