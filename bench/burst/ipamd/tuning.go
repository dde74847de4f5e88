package ipamd

import (
	"fmt"
	"strconv"
	"strings"
)

// Tuning is the part of ipamd's configuration a cluster operator tunes for
// bursts: its environment variables of the same names.
type Tuning struct {
	WarmENITarget    int
	WarmPrefixTarget int
	WarmIPTarget     int
	MinimumIPTarget  int
	SubnetDiscovery  bool
}

// DefaultTuning is the aws-node manifest's: WARM_ENI_TARGET=1,
// WARM_PREFIX_TARGET=1, ENABLE_SUBNET_DISCOVERY=true, WARM_IP_TARGET and
// MINIMUM_IP_TARGET unset.
func DefaultTuning() Tuning {
	return Tuning{WarmENITarget: 1, WarmPrefixTarget: 1, SubnetDiscovery: true}
}

// ParseTuning applies settings written as the environment would carry them,
// comma-separated (e.g. "WARM_PREFIX_TARGET=3" or
// "WARM_IP_TARGET=16,MINIMUM_IP_TARGET=32"), to base.
func ParseTuning(base Tuning, settings string) (Tuning, error) {
	t := base
	for _, kv := range strings.Split(settings, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return t, fmt.Errorf("ipamd setting %q: want NAME=VALUE", kv)
		}
		if k == "ENABLE_SUBNET_DISCOVERY" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return t, fmt.Errorf("ipamd setting %s: %w", k, err)
			}
			t.SubnetDiscovery = b
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return t, fmt.Errorf("ipamd setting %s=%q: want a whole number, 0 or more", k, v)
		}
		switch k {
		case "WARM_ENI_TARGET":
			t.WarmENITarget = n
		case "WARM_PREFIX_TARGET":
			t.WarmPrefixTarget = n
		case "WARM_IP_TARGET":
			t.WarmIPTarget = n
		case "MINIMUM_IP_TARGET":
			t.MinimumIPTarget = n
		default:
			return t, fmt.Errorf("ipamd setting %q: want one of WARM_ENI_TARGET, WARM_PREFIX_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET, ENABLE_SUBNET_DISCOVERY", k)
		}
	}
	return t, nil
}

// Apply sets the tuning's fields in cfg.
func (t Tuning) Apply(cfg *Config) {
	cfg.WarmENITarget, cfg.WarmPrefixTarget = t.WarmENITarget, t.WarmPrefixTarget
	cfg.WarmIPTarget, cfg.MinimumIPTarget = t.WarmIPTarget, t.MinimumIPTarget
	cfg.SubnetDiscovery = t.SubnetDiscovery
}
