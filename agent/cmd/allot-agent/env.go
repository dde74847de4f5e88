package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
)

// envFlag maps an environment variable aws-vpc-cni's aws-node reads to the
// allot-agent flag that means the same, so a DaemonSet's env block carries
// over. conv turns the variable's value into the flag's (nil: as is).
type envFlag struct {
	env, flag string
	conv      func(string) (string, error)
}

// envFlags is every variable the agent accepts. docs/migration-from-aws-vpc-cni.md
// lists the same table; the agent's tests check that each flag exists.
var envFlags = []envFlag{
	{env: "WARM_IP_TARGET", flag: "warm-ip-target"},
	{env: "MINIMUM_IP_TARGET", flag: "minimum-ip-target"},
	{env: "WARM_ENI_TARGET", flag: "warm-eni-target"},
	{env: "WARM_PREFIX_TARGET", flag: "warm-prefix-target"},
	{env: "MAX_ENI", flag: "max-enis"},
	{env: "ENABLE_PREFIX_DELEGATION", flag: "mode", conv: prefixMode},
	{env: "AWS_VPC_K8S_CNI_EXTERNALSNAT", flag: "external-snat"},
	{env: "AWS_VPC_K8S_CNI_EXCLUDE_SNAT_CIDRS", flag: "snat-exclude-cidrs"},
	{env: "AWS_VPC_ENI_MTU", flag: "mtu"},
	{env: "IP_COOLDOWN_PERIOD", flag: "cooldown", conv: seconds},
	{env: "AWS_VPC_K8S_CNI_LOGLEVEL", flag: "log-level"},
	{env: "MY_NODE_NAME", flag: "node-name"},
}

// applyEnv sets each flag whose variable lookup finds, before the command
// line is parsed, so a flag on the command line wins over the variable.
// An empty variable counts as unset, as in aws-node.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	for _, e := range envFlags {
		v, ok := lookup(e.env)
		if !ok || v == "" {
			continue
		}
		if e.conv != nil {
			var err error
			if v, err = e.conv(v); err != nil {
				return fmt.Errorf("%s=%q: %w", e.env, v, err)
			}
		}
		if err := fs.Set(e.flag, v); err != nil {
			return fmt.Errorf("%s=%q (--%s): %w", e.env, v, e.flag, err)
		}
	}
	return nil
}

func prefixMode(v string) (string, error) {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return "", errors.New("want true or false")
	}
	if on {
		return "prefix", nil
	}
	return "secondary-ip", nil
}

// seconds turns aws-node's bare seconds ("30") into a duration ("30s").
func seconds(v string) (string, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return "", errors.New("want a whole number of seconds")
	}
	return strconv.Itoa(n) + "s", nil
}
