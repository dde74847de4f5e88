package cni

import (
	"testing"
	"time"
)

func TestAgentSideFromMetrics(t *testing.T) {
	before, err := parseTotalsBytes([]byte(`# HELP allot_agent_cni_duration_seconds Time
allot_agent_cni_duration_seconds_bucket{otel_scope_name="x",verb="add",le="0.005"} 1
allot_agent_cni_duration_seconds_sum{otel_scope_name="x",verb="add"} 0.002
allot_agent_cni_duration_seconds_count{otel_scope_name="x",verb="add"} 1
allot_agent_checkpoint_write_seconds_sum{otel_scope_name="x",result="ok"} 0.001
allot_agent_checkpoint_write_seconds_count{otel_scope_name="x",result="ok"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseTotalsBytes([]byte(`allot_agent_cni_duration_seconds_sum{otel_scope_name="x",verb="add"} 0.032
allot_agent_cni_duration_seconds_count{otel_scope_name="x",verb="add"} 11
allot_agent_cni_duration_seconds_sum{otel_scope_name="x",verb="status"} 0.0005
allot_agent_cni_duration_seconds_count{otel_scope_name="x",verb="status"} 10
allot_agent_checkpoint_write_seconds_sum{otel_scope_name="x",result="ok"} 0.005
allot_agent_checkpoint_write_seconds_count{otel_scope_name="x",result="ok"} 10
allot_agent_checkpoint_write_seconds_sum{otel_scope_name="x",result="error"} 0.001
allot_agent_checkpoint_write_seconds_count{otel_scope_name="x",result="error"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	got := agentSide(before, after)
	want := AgentSide{Add: 3 * time.Millisecond, Writes: 10, Write: 500 * time.Microsecond}
	if got != want {
		t.Fatalf("agent side %+v, want %+v", got, want)
	}
	if _, err := parseTotalsBytes([]byte("allot_agent_checkpoint_write_seconds_sum nope\n")); err == nil {
		t.Fatal("a bad value parsed")
	}
}
