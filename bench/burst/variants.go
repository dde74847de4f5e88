package burst

import (
	"fmt"
	"slices"
	"strings"

	"github.com/allotnet/allot/agent/daemon"
	"github.com/allotnet/allot/bench/burst/cilium"
	"github.com/allotnet/allot/bench/burst/ipamd"
	"github.com/allotnet/allot/broker/planner"
)

// System says who calls EC2 in a variant.
type System string

// The systems compared.
const (
	// SystemAllot is allot: the agents ask the broker, the broker alone
	// calls EC2.
	SystemAllot System = "allot"
	// SystemIPAMD is aws-vpc-cni: every node's ipamd calls EC2 itself
	// (package ipamd).
	SystemIPAMD System = "ipamd"
	// SystemCilium is Cilium's operator in ENI mode: one process calls EC2
	// for every node through one client-side limiter (package cilium).
	SystemCilium System = "cilium"
)

// Variant is one burst of the run.
type Variant struct {
	System System
	Mode   daemon.Mode
	// Share is the fraction of each EC2 bucket the broker may use (allot);
	// the baselines always have the whole account.
	Share float64
	// TableError runs allot with its bucket table wrong by this fraction:
	// +0.2 means the broker believes every bucket is 20% larger (and
	// faster) than EC2's, -0.2 20% smaller. Zero: the table is right.
	TableError float64
	// Tenant is the fraction of every bucket another tool in the account
	// takes during the burst (throttle.Limiter.SetTenant). Zero: none.
	Tenant float64
	// Policy is allot's planner policy by name (planner.ParsePolicy);
	// empty: the run's PlanPolicy, or the broker's default.
	Policy string
	// Profile is how the pods arrive.
	Profile Profile
	// Tuning is a baseline's configuration, as its settings are written
	// (ipamd.ParseTuning, cilium.ParseTuning); empty: its defaults.
	Tuning string
}

// Name is how tables and the JSON line name the variant: the system and
// its settings, then, unless every pod arrives at once, the profile.
func (v Variant) Name() string {
	if v.Profile.Kind != "" && v.Profile.Kind != ProfileAll {
		p := v
		p.Profile = Profile{}
		return p.Name() + "@" + v.Profile.String()
	}
	if v.System != SystemAllot {
		name := fmt.Sprintf("%s/%s", v.System, v.Mode)
		if v.Tuning != "" {
			name += "/" + v.Tuning
		}
		return name
	}
	name := fmt.Sprintf("allot/%s/share=%g", v.Mode, v.Share)
	if v.Policy != "" {
		name += "/" + v.Policy
	}
	if v.TableError != 0 {
		name += fmt.Sprintf("/table%+g%%", 100*v.TableError)
	}
	if v.Tenant != 0 {
		name += fmt.Sprintf("/tenant=%g", v.Tenant)
	}
	return name
}

// brokerShare is the bucket share the broker is configured with: the
// variant's, shrunk by a table error that makes it believe the buckets
// smaller than they are (a larger belief is made by shrinking awssim's
// buckets instead: cloudBucketScale).
func (v Variant) brokerShare() float64 {
	if v.TableError < 0 {
		return v.Share * (1 + v.TableError)
	}
	return v.Share
}

// cloudBucketScale is what awssim's buckets (size and refill) are scaled
// by: 1/(1+e) for a table that is e too large, else 1.
func (v Variant) cloudBucketScale() float64 {
	if v.TableError > 0 {
		return 1 / (1 + v.TableError)
	}
	return 1
}

// boundShare is the share of EC2's default buckets the lower bound is
// computed at: what the variant could use at best, given its own share,
// the account's real buckets and the other tenant's part.
func (v Variant) boundShare() float64 {
	s := v.Share
	if v.System != SystemAllot {
		s = 1
	}
	return min(s, v.cloudBucketScale(), 1-v.Tenant)
}

// Variants lists the bursts of the run in order: per arrival profile and
// mode, allot at each share, with each table error, with each other tenant
// at each share, then each baseline at its defaults and tuned. A new
// system or policy is one more block in variantsOf.
func (c Config) Variants() []Variant {
	profiles := c.Profiles
	if len(profiles) == 0 {
		profiles = []Profile{{Kind: ProfileAll}}
	}
	var out []Variant
	for _, p := range profiles {
		for _, v := range c.variantsOf() {
			v.Profile = p
			out = append(out, v)
		}
	}
	return out
}

// variantsOf lists one profile's variants.
func (c Config) variantsOf() []Variant {
	var out []Variant
	policies := c.PlanPolicies
	if len(policies) == 0 {
		policies = []string{""}
	}
	for _, m := range c.Modes {
		for _, s := range c.Shares {
			for _, p := range policies {
				out = append(out, Variant{System: SystemAllot, Mode: m, Share: s, Policy: p})
			}
		}
		if c.Ablation && !slices.Contains(policies, planner.Naive.String()) {
			out = append(out, Variant{System: SystemAllot, Mode: m, Share: 1, Policy: planner.Naive.String()})
		}
		for _, e := range c.TableErrors {
			out = append(out, Variant{System: SystemAllot, Mode: m, Share: 1, TableError: e, Policy: policies[0]})
		}
		for _, f := range c.Tenants {
			for _, s := range c.Shares {
				out = append(out, Variant{System: SystemAllot, Mode: m, Share: s, Tenant: f, Policy: policies[0]})
			}
		}
		if c.Baseline {
			out = append(out, Variant{System: SystemIPAMD, Mode: m, Share: 1})
			for _, t := range c.IPAMDTuned[m] {
				out = append(out, Variant{System: SystemIPAMD, Mode: m, Share: 1, Tuning: t})
			}
		}
		if c.Cilium {
			out = append(out, Variant{System: SystemCilium, Mode: m, Share: 1})
			for _, t := range c.CiliumTuned[m] {
				out = append(out, Variant{System: SystemCilium, Mode: m, Share: 1, Tuning: t})
			}
		}
	}
	return out
}

// DefaultIPAMDTuned are the tuned ipamd configurations run next to the
// defaults: in secondary-IP mode a second warm ENI (WARM_ENI_TARGET=2), so
// a burst needs one new ENI per node fewer; in prefix mode
// WARM_PREFIX_TARGET=3, which makes one Assign ask for up to three
// prefixes.
const DefaultIPAMDTuned = "secondary-ip:WARM_ENI_TARGET=2;prefix:WARM_PREFIX_TARGET=3"

// DefaultCiliumTuned is the tuned Cilium operator run next to its defaults:
// its limiter raised to 20 calls a second with a burst of 100 (what EC2's
// four mutating buckets a burst uses refill together), and 16 addresses
// above the watermark in every allocation, so one call asks for more
// without holding more in the warm pool.
const DefaultCiliumTuned = "secondary-ip:limit-ipam-api-qps=20,limit-ipam-api-burst=100,max-above-watermark=16;prefix:limit-ipam-api-qps=20,limit-ipam-api-burst=100,max-above-watermark=16"

// ParseCiliumTunings is ParseTunings for Cilium's settings.
func ParseCiliumTunings(s string) (map[daemon.Mode][]string, error) {
	return parseTunings(s, func(settings string) error {
		_, err := cilium.ParseTuning(cilium.DefaultTuning(), settings)
		return err
	})
}

// ParseTunings reads ipamd configurations per mode: entries
// "mode:settings" separated by ';', each checked as ipamd.ParseTuning reads
// it.
func ParseTunings(s string) (map[daemon.Mode][]string, error) {
	return parseTunings(s, func(settings string) error {
		_, err := ipamd.ParseTuning(ipamd.DefaultTuning(), settings)
		return err
	})
}

func parseTunings(s string, check func(string) error) (map[daemon.Mode][]string, error) {
	out := map[daemon.Mode][]string{}
	for _, e := range strings.Split(s, ";") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		m, settings, ok := strings.Cut(e, ":")
		mode := daemon.Mode(strings.TrimSpace(m))
		if !ok || (mode != daemon.ModeSecondaryIP && mode != daemon.ModePrefix) {
			return nil, fmt.Errorf("configuration %q: want %s:SETTINGS or %s:SETTINGS", e, daemon.ModeSecondaryIP, daemon.ModePrefix)
		}
		if err := check(settings); err != nil {
			return nil, err
		}
		out[mode] = append(out[mode], strings.TrimSpace(settings))
	}
	return out, nil
}
