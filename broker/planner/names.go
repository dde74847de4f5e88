package planner

import (
	"fmt"
	"log/slog"
)

// String returns the mode as the store and the agent spell it.
func (m Mode) String() string {
	switch m {
	case SecondaryIP:
		return "secondary-ip"
	case Prefix:
		return "prefix"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode parses a mode as String spells it.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "secondary-ip":
		return SecondaryIP, nil
	case "prefix":
		return Prefix, nil
	}
	return 0, fmt.Errorf("unknown address mode %q (want secondary-ip or prefix)", s)
}

func (r Reason) String() string {
	switch r {
	case NodeFull:
		return "node-full"
	case BudgetExhausted:
		return "budget-exhausted"
	case NodeBusy:
		return "node-busy"
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// EC2 action names, as EC2 and awssim count calls: the executor paces each
// action kind by the bucket of the call it starts with.
const (
	CallCreate = "CreateNetworkInterface"
	CallAttach = "AttachNetworkInterface"
	CallModify = "ModifyNetworkInterfaceAttribute"
	CallAssign = "AssignPrivateIpAddresses"
	CallDetach = "DetachNetworkInterface"
)

// LogValue summarises a plan for the log: its actions by kind and the
// nodes left short. The plan itself stays the value's Any(), for handlers
// that want every action.
func (p Plan) LogValue() slog.Value {
	var assign, create int
	for _, a := range p.Actions {
		switch a.Kind {
		case Assign:
			assign++
		case CreateAttach:
			create++
		}
	}
	return slog.GroupValue(
		slog.Int("actions", len(p.Actions)),
		slog.Int("assign", assign),
		slog.Int("create_attach", create),
		slog.Int("unmet", len(p.Unmet)),
	)
}
