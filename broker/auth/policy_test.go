package auth

import (
	"testing"

	"google.golang.org/grpc"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// TestEveryMethodHasAPolicy: a method missing from the table is refused to
// everyone, so a new RPC must be given its roles here; this test names any
// that was not, instead of leaving it closed by surprise.
func TestEveryMethodHasAPolicy(t *testing.T) {
	for _, sd := range []grpc.ServiceDesc{
		allotv1.NodeService_ServiceDesc, allotv1.BudgetService_ServiceDesc,
		allotv1.AdminService_ServiceDesc, allotv1.AuthService_ServiceDesc,
	} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, n := range names {
			full := "/" + sd.ServiceName + "/" + n
			if _, ok := methods[full]; !ok {
				t.Errorf("%s has no entry in the policy table (policy.go)", full)
			}
		}
	}
}

// TestLogsAreForAdmins: the broker's log records name nodes, pods and
// addresses; only an admin may read them, not a planner or a node.
func TestLogsAreForAdmins(t *testing.T) {
	m := allotv1.AdminService_GetLogs_FullMethodName
	if !allowed(m, RoleAdmin) {
		t.Errorf("an admin may not call %s", m)
	}
	for _, r := range []Role{RolePlanner, RoleNode, RoleNone} {
		if allowed(m, r) || isPublic(m) {
			t.Errorf("role %q may call %s", r, m)
		}
	}
}
