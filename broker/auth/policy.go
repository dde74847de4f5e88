package auth

import (
	"slices"
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	allotv1 "github.com/allotnet/allot/proto/allot/v1"
)

// access is who may call a method.
type access struct {
	public bool   // anyone, without a credential
	roles  []Role // otherwise: these roles
	// anyRole lets every authenticated caller with a role in (schema
	// reflection: the API is public, the caller need not be).
	anyRole bool
}

var (
	publicAccess  = access{public: true}
	nodeAccess    = access{roles: []Role{RoleNode}}
	readerAccess  = access{roles: []Role{RolePlanner, RoleAdmin}}
	adminAccess   = access{roles: []Role{RoleAdmin}}
	anyRoleAccess = access{anyRole: true}
)

// methods is the whole policy: every method the broker serves and who may
// call it. A method missing here is refused to everyone, so a service added
// later is closed until it is listed. A node's calls are further held to
// its own instance (see instanceOf).
var methods = map[string]access{
	allotv1.AuthService_Challenge_FullMethodName: publicAccess,
	allotv1.AuthService_Attest_FullMethodName:    publicAccess,
	healthpb.Health_Check_FullMethodName:         publicAccess,
	healthpb.Health_Watch_FullMethodName:         publicAccess,
	healthpb.Health_List_FullMethodName:          publicAccess,

	allotv1.NodeService_Register_FullMethodName:    nodeAccess,
	allotv1.NodeService_ReportUsage_FullMethodName: nodeAccess,
	allotv1.NodeService_SetDemand_FullMethodName:   nodeAccess,
	allotv1.NodeService_WatchNode_FullMethodName:   nodeAccess,
	allotv1.NodeService_AckRelease_FullMethodName:  nodeAccess,
	allotv1.NodeService_Heartbeat_FullMethodName:   nodeAccess,

	allotv1.BudgetService_GetSubnetBudget_FullMethodName:    readerAccess,
	allotv1.BudgetService_ListSubnetBudgets_FullMethodName:  readerAccess,
	allotv1.BudgetService_WatchSubnetBudgets_FullMethodName: readerAccess,
	allotv1.BudgetService_SetSubnetBudget_FullMethodName:    adminAccess,
	allotv1.BudgetService_GetCapacity_FullMethodName:        readerAccess,
	allotv1.BudgetService_GetMaxPods_FullMethodName:         readerAccess,

	allotv1.AdminService_ListNodes_FullMethodName: adminAccess,
	allotv1.AdminService_ListENIs_FullMethodName:  adminAccess,
	allotv1.AdminService_GetStatus_FullMethodName: adminAccess,
	allotv1.AdminService_Check_FullMethodName:     adminAccess,
	allotv1.AdminService_GetLogs_FullMethodName:   adminAccess,

	allotv1.PodNetworkService_ListPodNetworks_FullMethodName:  readerAccess,
	allotv1.PodNetworkService_GetPodNetwork_FullMethodName:    readerAccess,
	allotv1.PodNetworkService_SetPodNetwork_FullMethodName:    adminAccess,
	allotv1.PodNetworkService_DeletePodNetwork_FullMethodName: adminAccess,

	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      anyRoleAccess,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": anyRoleAccess,
}

// isPublic says whether method answers callers without a credential.
func isPublic(method string) bool { return methods[method].public }

// allowed says whether role may call method.
func allowed(method string, r Role) bool {
	a, ok := methods[method]
	switch {
	case !ok:
		return false
	case a.public:
		return true
	case a.anyRole:
		return r != RoleNone
	}
	return slices.Contains(a.roles, r)
}

// isNodeMethod says whether method acts for one node, named in its request.
func isNodeMethod(method string) bool {
	return strings.HasPrefix(method, "/"+allotv1.NodeService_ServiceDesc.ServiceName+"/")
}

// instanceOf is the instance a node request acts for; ok is false for a
// message that names none.
func instanceOf(req any) (string, bool) {
	switch r := req.(type) {
	case *allotv1.RegisterRequest:
		return r.GetNode().GetInstanceId(), true
	case interface{ GetInstanceId() string }:
		return r.GetInstanceId(), true
	}
	return "", false
}

// Methods lists every method the policy knows, for tests that check the
// table against the services a server registers.
func Methods() []string {
	out := make([]string, 0, len(methods))
	for m := range methods {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}
