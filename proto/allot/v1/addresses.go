package allotv1

// PrefixSize is the number of IPv4 addresses in one /28 prefix delegated
// to an ENI. A prefix takes one address slot of the ENI.
const PrefixSize = 16

// PodAddresses is how many pod addresses a count of secondary addresses
// and of /28 prefixes makes: the unit every count between the agent and
// the broker is stated in (SetDemandRequest.known, warm_shortfall,
// ReportUsageRequest.excess, RegisterResponse.max_addresses). Both sides
// count with it, so they count alike.
func PodAddresses(addresses, prefixes int) int { return addresses + PrefixSize*prefixes }
