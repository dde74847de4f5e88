package main

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/daemon"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var required = []string{"--imds-endpoint=http://127.0.0.1:1", "--broker=127.0.0.1:7600"}

func TestEnvVarsMapToFlags(t *testing.T) {
	c, err := parseFlagsEnv(required, io.Discard, envOf(map[string]string{
		"WARM_IP_TARGET": "5", "MINIMUM_IP_TARGET": "10", "MAX_ENI": "2",
		"ENABLE_PREFIX_DELEGATION": "true", "AWS_VPC_K8S_CNI_EXTERNALSNAT": "true",
		"IP_COOLDOWN_PERIOD": "45", "AWS_VPC_K8S_CNI_LOGLEVEL": "DEBUG", "MY_NODE_NAME": "ip-10-0-1-5.ec2.internal",
		"WARM_ENI_TARGET": "", // empty counts as unset
	}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.agent
	if a.Warm.WarmIPs != 5 || a.Warm.MinimumIPs != 10 || a.Warm.MaxENIs != 2 || a.Warm.WarmENIs != 0 {
		t.Errorf("targets %+v", a.Warm)
	}
	if a.Mode != daemon.ModePrefix || !a.ExternalSNAT || a.Cooldown != 45*time.Second {
		t.Errorf("mode %v externalSNAT %v cooldown %v", a.Mode, a.ExternalSNAT, a.Cooldown)
	}
	if c.log.Level.String() != "DEBUG" || c.agent.NodeName != "ip-10-0-1-5.ec2.internal" {
		t.Errorf("log %+v node %q", c.log, c.agent.NodeName)
	}
}

func TestFlagsWinOverEnv(t *testing.T) {
	c, err := parseFlagsEnv(append(required, "--warm-ip-target=7", "--mode=secondary-ip"), io.Discard,
		envOf(map[string]string{"WARM_IP_TARGET": "5", "ENABLE_PREFIX_DELEGATION": "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.agent.Warm.WarmIPs != 7 || c.agent.Mode != daemon.ModeSecondaryIP {
		t.Fatalf("warm %d mode %v: want the flags' 7 and secondary-ip", c.agent.Warm.WarmIPs, c.agent.Mode)
	}
}

func TestBadEnvValueNamesTheVariable(t *testing.T) {
	for env, val := range map[string]string{
		"WARM_IP_TARGET": "lots", "ENABLE_PREFIX_DELEGATION": "maybe", "IP_COOLDOWN_PERIOD": "30s",
	} {
		_, err := parseFlagsEnv(required, io.Discard, envOf(map[string]string{env: val}))
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%s: err = %v, want one naming the variable", env, val, err)
		}
	}
}

// TestEveryEnvVarHasItsFlag guards the table against a renamed flag.
func TestEveryEnvVarHasItsFlag(t *testing.T) {
	for _, e := range envFlags {
		args := append(append([]string{}, required...), "--"+e.flag+"="+sample(e.flag))
		if _, err := parseFlagsEnv(args, io.Discard, envOf(nil)); err != nil && strings.Contains(err.Error(), "not defined") {
			t.Errorf("%s maps to --%s, which the agent does not define", e.env, e.flag)
		}
	}
}

func sample(flag string) string {
	switch flag {
	case "mode":
		return "prefix"
	case "cooldown":
		return "1s"
	case "log-level":
		return "info"
	case "external-snat":
		return "true"
	case "snat-exclude-cidrs":
		return "10.9.0.0/16"
	case "node-name":
		return "n"
	}
	return "1"
}

// TestMigrationGuideListsEveryVariable keeps the guide's table and envFlags
// equal: each variable the agent reads is documented with its flag.
func TestMigrationGuideListsEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/migration-from-aws-vpc-cni.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envFlags {
		row := "| `" + e.env + "` | `--" + e.flag + "` |"
		if !strings.Contains(string(doc), row) {
			t.Errorf("docs/migration-from-aws-vpc-cni.md lacks the row %q", row)
		}
	}
}
