package executor

import (
	"github.com/allotnet/allot/broker/planner"
	"github.com/allotnet/allot/broker/store"
)

// surplus asks the planner what to propose giving back of a node's free
// addresses. How many is the agent's to say (Usage.Excess, from its warm
// targets); a report without it proposes nothing. Which ones is the
// planner's (planner.ChooseRelease): only addresses of attached ENIs (and
// the primary) that the report lists free.
func surplus(n store.Node, enis []store.ENI, d store.Demand, u store.Usage, margin int) planner.Release {
	if !u.HasExcess {
		return planner.Release{}
	}
	var held []planner.HeldENI
	for _, x := range enis {
		if x.Primary || x.Status == store.ENIAttached {
			held = append(held, heldENI(x))
		}
	}
	return planner.ChooseRelease(planner.ReleaseInput{
		Mode: mode(n.Mode), Pending: d.Pending, WarmShortfall: d.WarmShortfall, ENIs: held,
		Assigned: u.Assigned, Free: u.Free, Excess: u.Excess, Margin: margin,
	})
}

// heldENI is the planner's view of an ENI record.
func heldENI(x store.ENI) planner.HeldENI {
	return planner.HeldENI{ID: x.ID, DeviceIndex: x.DeviceIndex, Primary: x.Primary, PrimaryIP: x.PrimaryIP,
		Addresses: x.Addresses, Prefixes: x.Prefixes}
}
