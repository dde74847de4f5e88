package plugin

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/allotnet/allot/agent/cniserver"
)

// TestEveryServerCodeIsMapped: each code the agent's error table can send
// has a deliberate CNI code here, not the internal-error fallback.
func TestEveryServerCodeIsMapped(t *testing.T) {
	for _, ec := range cniserver.ErrorCodes {
		if _, ok := cniCodes[ec.Code]; !ok {
			t.Errorf("agent error %q travels as %s, which the plugin does not map", ec.Err, ec.Code)
		}
	}
}

// TestAgentError: what the runtime sees for each agent failure, per verb.
func TestAgentError(t *testing.T) {
	cases := []struct {
		err         error
		verb        string
		want        uint
		unreachable bool
	}{
		{status.Error(codes.ResourceExhausted, "pool empty"), "ADD", types.ErrTryAgainLater, false},
		{status.Error(codes.ResourceExhausted, "pool empty"), "STATUS", types.ErrPluginNotAvailable, false},
		{status.Error(codes.Unavailable, "no socket"), "ADD", types.ErrTryAgainLater, true},
		{status.Error(codes.Unavailable, "no socket"), "STATUS", types.ErrPluginNotAvailable, true},
		{status.Error(codes.DeadlineExceeded, "slow"), "DEL", types.ErrTryAgainLater, true},
		{status.Error(codes.DeadlineExceeded, "slow"), "STATUS", types.ErrPluginNotAvailable, true},
		{status.Error(codes.NotFound, "unknown"), "CHECK", types.ErrUnknownContainer, false},
		{status.Error(codes.FailedPrecondition, "route missing"), "CHECK", CodeCheckFailed, false},
		{status.Error(codes.InvalidArgument, "no netns"), "ADD", types.ErrInvalidEnvironmentVariables, false},
		{status.Error(codes.Unimplemented, "old agent"), "GC", types.ErrIncompatibleCNIVersion, false},
		{status.Error(codes.Internal, "netlink"), "ADD", types.ErrInternal, false},
		{status.Error(codes.Internal, "netlink"), "STATUS", types.ErrLimitedConnectivity, false},
		{errors.New("not a status"), "ADD", types.ErrInternal, false},
	}
	for _, tc := range cases {
		e := agentError(tc.verb, tc.err)
		if e.Code != tc.want {
			t.Errorf("%s %v: code %d, want %d", tc.verb, tc.err, e.Code, tc.want)
		}
		if got := agentUnreachable(tc.err); got != tc.unreachable {
			t.Errorf("agentUnreachable(%v) = %v, want %v", tc.err, got, tc.unreachable)
		}
	}
}

// TestParseNetConfDefaults: the fields a minimal conflist leaves out.
func TestParseNetConfDefaults(t *testing.T) {
	c, err := parseNetConf([]byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.AgentSocket != DefaultAgentSocket || c.delQueue != DefaultDelQueueDir || c.timeout != DefaultTimeout {
		t.Errorf("defaults: %+v timeout %v", c, c.timeout)
	}
	// Absent is the default queue; "" is no queue, as for the agent's flag.
	c, err = parseNetConf([]byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","delQueueDir":""}`))
	if err != nil || c.delQueue != "" {
		t.Errorf(`delQueueDir "" parsed as queue %q (%v), want no queue`, c.delQueue, err)
	}
	c, err = parseNetConf([]byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","timeout":"1500ms"}`))
	if err != nil || c.timeout.Milliseconds() != 1500 {
		t.Errorf("timeout 1500ms parsed as %v (%v)", c.timeout, err)
	}
	for _, bad := range []string{`"0s"`, `"-1s"`, `"10"`, `5`} {
		_, err := parseNetConf([]byte(`{"cniVersion":"1.1.0","name":"allot","type":"allot","timeout":` + bad + `}`))
		var te *types.Error
		if !errors.As(err, &te) || (te.Code != types.ErrInvalidNetworkConfig && te.Code != types.ErrDecodingFailure) {
			t.Errorf("timeout %s: err %v, want an invalid-config error", bad, err)
		}
	}
}
