package daemon

import "github.com/allotnet/allot/agent/pool"

// knownLimits are EC2's published ENI limits (max ENIs, IPv4 addresses per
// ENI with the primary) of common instance types. The warm-pool policy needs
// them to size its demand; the broker's registration answer only carries the
// node's total, so for a type not listed here the agent approximates (see
// brokerlink) unless Config.Limits is set.
var knownLimits = map[string]pool.Limits{
	"t2.medium":   {MaxENIs: 3, IPv4PerENI: 6},
	"t3.small":    {MaxENIs: 3, IPv4PerENI: 4},
	"t3.medium":   {MaxENIs: 3, IPv4PerENI: 6},
	"t3.large":    {MaxENIs: 3, IPv4PerENI: 12},
	"m4.large":    {MaxENIs: 2, IPv4PerENI: 10},
	"m5.large":    {MaxENIs: 3, IPv4PerENI: 10},
	"m5.xlarge":   {MaxENIs: 4, IPv4PerENI: 15},
	"m5.2xlarge":  {MaxENIs: 4, IPv4PerENI: 15},
	"m5.4xlarge":  {MaxENIs: 8, IPv4PerENI: 30},
	"m5.24xlarge": {MaxENIs: 15, IPv4PerENI: 50},
	"m6i.large":   {MaxENIs: 3, IPv4PerENI: 10},
	"m6i.xlarge":  {MaxENIs: 4, IPv4PerENI: 15},
	"c5.large":    {MaxENIs: 3, IPv4PerENI: 10},
	"c5.xlarge":   {MaxENIs: 4, IPv4PerENI: 15},
	"c5.2xlarge":  {MaxENIs: 4, IPv4PerENI: 15},
	"c5.4xlarge":  {MaxENIs: 8, IPv4PerENI: 30},
	"r5.large":    {MaxENIs: 3, IPv4PerENI: 10},
	"r5.xlarge":   {MaxENIs: 4, IPv4PerENI: 15},
	"r5.2xlarge":  {MaxENIs: 4, IPv4PerENI: 15},
}

// KnownLimits returns the built-in ENI limits of an instance type.
func KnownLimits(instanceType string) (pool.Limits, bool) {
	l, ok := knownLimits[instanceType]
	return l, ok
}
