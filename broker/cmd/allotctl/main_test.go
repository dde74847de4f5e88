package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/broker/etcdembed/etcdembedtest"
	"github.com/allotnet/allot/broker/server"
	"github.com/allotnet/allot/broker/store"
	"github.com/allotnet/allot/internal/logring"
)

// startServer runs a broker gRPC server (no engine) over embedded etcd with
// one subnet, one node and one ENI recorded.
func startServer(t *testing.T) string {
	t.Helper()
	_, addr := startServerStore(t)
	return addr
}

// startServerStore is startServer that also returns the store.
func startServerStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	st, err := store.Open(etcdembedtest.Start(t), "ctl")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.PutSubnet(ctx, store.Subnet{ID: "subnet-0000000a", CIDR: "10.0.1.0/24", AvailabilityZone: "us-east-1a", Usable: 251}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutNode(ctx, store.Node{InstanceID: "i-00000001", NodeName: "ip-10-0-0-10.ec2.internal", InstanceType: "m5.large",
		SubnetID: "subnet-0000000a", Mode: "secondary-ip", MaxENIs: 3, IPv4PerENI: 10}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPrimaryENI(ctx, store.ENI{ID: "eni-00000001", InstanceID: "i-00000001", SubnetID: "subnet-0000000a",
		MAC: "02:00:00:00:00:01", PrimaryIP: "10.0.1.4", Addresses: []string{"10.0.1.5", "10.0.1.6"}}); err != nil {
		t.Fatal(err)
	}
	logs := logring.New(10)
	log := logring.Tee(slog.New(slog.DiscardHandler), logs, slog.LevelInfo)
	log.Info("allot-broker starting", "replica", "ctl-test")
	srv, err := server.New(server.Config{Store: st, Logger: log, RecentLogs: logs})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Stop(ctx)
	})
	return st, lis.Addr().String()
}

func ctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	setHeadroom, setCap, eniNode = -1, -1, ""
	budgetsBy, budgetsWatch, maxPodsType, maxPodsMode = "subnet", false, "", "secondary-ip"
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestBudgetsTableAndJSON(t *testing.T) {
	addr := startServer(t)
	code, out, errs := ctl(t, "--broker", addr, "budgets")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SUBNET") || !strings.HasPrefix(lines[1], "subnet-0000000a") {
		t.Fatalf("table:\n%s", out)
	}
	// Aligned: the LIMIT column starts at the same offset in both lines.
	if h, r := strings.Index(lines[0], "LIMIT"), strings.Index(lines[1], "251"); h != r {
		t.Fatalf("columns not aligned (%d vs %d):\n%s", h, r, out)
	}

	code, out, errs = ctl(t, "budgets", "-o", "json", "--broker", addr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []budgetRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rows) != 1 || rows[0].SubnetID != "subnet-0000000a" || rows[0].Limit != 251 || rows[0].Attached != 2 ||
		rows[0].Available != 249 {
		t.Fatalf("rows %+v", rows)
	}
}

func TestBudgetSetKeepsUnsetField(t *testing.T) {
	addr := startServer(t)
	if code, _, errs := ctl(t, "--broker", addr, "budget", "set", "subnet-0000000a", "--headroom", "20", "--cap", "100"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	code, out, errs := ctl(t, "--broker", addr, "budget", "set", "subnet-0000000a", "--cap", "50", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rows []budgetRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if rows[0].Headroom != 20 || rows[0].Cap != 50 || rows[0].Limit != 50 {
		t.Fatalf("after set: %+v", rows[0])
	}
	if code, _, errs := ctl(t, "--broker", addr, "budget", "set", "subnet-0000000a"); code != 2 || !strings.Contains(errs, "--headroom") {
		t.Fatalf("set without values: exit %d, %q", code, errs)
	}
}

func TestErrorsArePlainAndNonZero(t *testing.T) {
	addr := startServer(t)
	code, _, errs := ctl(t, "--broker", addr, "budget", "get", "subnet-bad")
	if code != 1 || strings.Contains(errs, "rpc error") || !strings.Contains(errs, `subnet_id: "subnet-bad" is not valid`) {
		t.Fatalf("invalid subnet: exit %d, stderr %q", code, errs)
	}
	code, _, errs = ctl(t, "--broker", addr, "budget", "get", "subnet-0000000f")
	if code != 1 || !strings.Contains(errs, "subnet subnet-0000000f has no budget record") {
		t.Fatalf("unknown subnet: exit %d, stderr %q", code, errs)
	}
	if code, _, _ := ctl(t, "--broker", addr, "frobnicate"); code != 2 {
		t.Fatalf("unknown command: exit %d", code)
	}
	if code, _, _ := ctl(t, "--broker", addr, "nodes", "extra"); code != 2 {
		t.Fatalf("extra argument: exit %d", code)
	}
	code, _, errs = ctl(t, "--broker", "127.0.0.1:1", "--timeout", "2s", "status")
	if code != 1 || errs == "" {
		t.Fatalf("unreachable broker: exit %d, stderr %q", code, errs)
	}
}

// TestErrorsAsJSON: with --log-format json an error is one JSON record on
// stderr with the message and the exit code; a bad format is a usage error.
func TestErrorsAsJSON(t *testing.T) {
	addr := startServer(t)
	code, _, errs := ctl(t, "--broker", addr, "--log-format", "json", "budget", "get", "subnet-0000000f")
	var rec struct {
		Level    string `json:"level"`
		Msg      string `json:"msg"`
		ExitCode int    `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(errs), &rec); err != nil {
		t.Fatalf("stderr is not one JSON record: %v: %q", err, errs)
	}
	if code != 1 || rec.Level != "ERROR" || rec.ExitCode != 1 || !strings.Contains(rec.Msg, "subnet subnet-0000000f has no budget record") {
		t.Errorf("unknown subnet: exit %d, record %+v", code, rec)
	}
	if code, _, errs := ctl(t, "--broker", addr, "--log-format", "yaml", "status"); code != 2 || !strings.Contains(errs, "--log-format") {
		t.Errorf("--log-format yaml: exit %d, stderr %q", code, errs)
	}
}

func TestNodesENIsStatus(t *testing.T) {
	addr := startServer(t)
	code, out, errs := ctl(t, "--broker", addr, "nodes", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var nodes []nodeRow
	if err := json.Unmarshal([]byte(out), &nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].InstanceID != "i-00000001" || nodes[0].ENIs != 1 || nodes[0].Attached != 2 ||
		nodes[0].NodeName != "ip-10-0-0-10.ec2.internal" {
		t.Fatalf("nodes %+v", nodes)
	}
	code, out, _ = ctl(t, "--broker", addr, "nodes")
	if lines := strings.Split(out, "\n"); code != 0 || len(lines) < 2 || strings.Fields(lines[0])[1] != "NODE" ||
		strings.Fields(lines[1])[1] != "ip-10-0-0-10.ec2.internal" {
		t.Fatalf("nodes table: exit %d\n%s", code, out)
	}
	code, out, _ = ctl(t, "--broker", addr, "enis", "--node", "i-00000001")
	if code != 0 || !strings.Contains(out, "eni-00000001") || !strings.Contains(out, "0*") {
		t.Fatalf("enis: exit %d\n%s", code, out)
	}
	code, out, _ = ctl(t, "--broker", addr, "enis", "--node", "i-00000002", "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("enis of another node: exit %d\n%s", code, out)
	}
	code, out, _ = ctl(t, "--broker", addr, "status")
	if code != 0 || !strings.Contains(out, "(none)") || !strings.Contains(out, "max addresses") {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
}

func TestBudgetsByZoneAndCluster(t *testing.T) {
	addr := startServer(t)
	code, out, errs := ctl(t, "--broker", addr, "budgets", "--by", "az", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var zones []totalRow
	if err := json.Unmarshal([]byte(out), &zones); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	// One m5.large (27 pod slots) holding nothing yet in a /24 with 249
	// addresses available: the node binds.
	if len(zones) != 1 || zones[0].AvailabilityZone != "us-east-1a" || zones[0].Subnets != 1 || zones[0].Available != 249 ||
		zones[0].Pods.NodePods != 27 || zones[0].Pods.Pods != 27 || zones[0].Pods.Binding != "nodes" {
		t.Fatalf("zones %+v", zones)
	}
	code, out, errs = ctl(t, "--broker", addr, "budgets", "--by", "cluster")
	if code != 0 || !strings.Contains(out, "(cluster)") || !strings.Contains(out, "BINDS") || !strings.Contains(out, "nodes") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	code, out, _ = ctl(t, "--broker", addr, "budgets", "-o", "json")
	var rows []budgetRow
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil || len(rows) != 1 || rows[0].Pods.Binding != "nodes" {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if code, _, errs := ctl(t, "--broker", addr, "budgets", "--by", "region"); code != 2 || !strings.Contains(errs, "--by") {
		t.Errorf("--by region: exit %d: %s", code, errs)
	}
	if code, _, errs := ctl(t, "--broker", addr, "max-pods"); code != 2 || !strings.Contains(errs, "--instance-type") {
		t.Errorf("max-pods without a type: exit %d: %s", code, errs)
	}
}

// TestCorruptRecordsQuarantined: a node record and another node's usage
// record that do not decode leave `nodes` and `budgets` answering: the bad
// node is listed as quarantined, naming its key, and the rest as before.
func TestCorruptRecordsQuarantined(t *testing.T) {
	st, addr := startServerStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Client().Put(ctx, st.Prefix()+"nodes/i-0000000b", "{not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().Put(ctx, st.Prefix()+"usage/i-0000000c", `{"v":9}`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := ctl(t, "--broker", addr, "nodes", "-o", "json")
	if code != 0 {
		t.Fatalf("nodes: exit %d: %s", code, errs)
	}
	var rows []nodeRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rows) != 2 || rows[0].InstanceID != "i-00000001" || rows[0].UnmetReason != "" ||
		rows[1].InstanceID != "i-0000000b" || rows[1].UnmetReason != store.UnmetQuarantined ||
		!strings.Contains(rows[1].UnmetMessage, "nodes/i-0000000b") {
		t.Fatalf("rows %+v", rows)
	}
	if code, out, errs := ctl(t, "--broker", addr, "budgets"); code != 0 || !strings.Contains(out, "subnet-0000000a") {
		t.Fatalf("budgets: exit %d: %s\n%s", code, errs, out)
	}
}
