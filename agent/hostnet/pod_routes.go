package hostnet

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// podRoutePriority is the metric for the routes of the pod interface at
// index idx. A pod may have several attachments (eth0, eth1, …), each
// through its own veth to the same gateway address; routes that differ only
// in their device would replace one another, so a second interface's ADD
// would take the first one's default route away. The first interface wired
// keeps metric 0; each later one gets the next metric above those present,
// so its routes sit behind the first one's and vanish with its veth. An
// interface that already has a default route keeps that route's metric, so
// running setup again changes nothing.
func podRoutePriority(podNL *netlink.Handle, idx int) (int, error) {
	routes, err := retryDump(func() ([]netlink.Route, error) {
		return podNL.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: mainTable}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return 0, fmt.Errorf("list pod routes: %w", err)
	}
	prio, others := 0, false
	for _, r := range routes {
		if ipNetString(r.Dst) != "0.0.0.0/0" {
			continue
		}
		if r.LinkIndex == idx {
			return r.Priority, nil
		}
		if !others || r.Priority >= prio {
			prio, others = r.Priority+1, true
		}
	}
	return prio, nil
}
