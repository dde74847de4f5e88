package plugin

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/allotnet/allot/agent/cniserver"
	"github.com/allotnet/allot/agent/cniserver/cniwire"
	"github.com/allotnet/allot/cni/cnispec"
)

// TestEveryServerCodeIsMapped: each code the agent's error table can send
// has a deliberate CNI code here, not the internal-error fallback.
func TestEveryServerCodeIsMapped(t *testing.T) {
	for _, ec := range cniserver.ErrorCodes {
		if _, ok := cniCodes[cniwire.Code(ec.Code)]; !ok {
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
		{cniwire.Errorf(cniwire.ResourceExhausted, "pool empty"), "ADD", types.ErrTryAgainLater, false},
		{cniwire.Errorf(cniwire.ResourceExhausted, "pool empty"), "STATUS", types.ErrPluginNotAvailable, false},
		{cniwire.Errorf(cniwire.Unavailable, "no socket"), "ADD", types.ErrTryAgainLater, true},
		{cniwire.Errorf(cniwire.Unavailable, "no socket"), "STATUS", types.ErrPluginNotAvailable, true},
		{cniwire.Errorf(cniwire.DeadlineExceeded, "slow"), "DEL", types.ErrTryAgainLater, true},
		{cniwire.Errorf(cniwire.DeadlineExceeded, "slow"), "STATUS", types.ErrPluginNotAvailable, true},
		{cniwire.Errorf(cniwire.NotFound, "unknown"), "CHECK", types.ErrUnknownContainer, false},
		{cniwire.Errorf(cniwire.FailedPrecondition, "route missing"), "CHECK", CodeCheckFailed, false},
		{cniwire.Errorf(cniwire.InvalidArgument, "no netns"), "ADD", types.ErrInvalidEnvironmentVariables, false},
		{cniwire.Errorf(cniwire.Unimplemented, "old agent"), "GC", types.ErrIncompatibleCNIVersion, false},
		{cniwire.Errorf(cniwire.Internal, "netlink"), "ADD", types.ErrInternal, false},
		{cniwire.Errorf(cniwire.Internal, "netlink"), "STATUS", types.ErrLimitedConnectivity, false},
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
		var te *cnispec.Error
		if !errors.As(err, &te) || (te.Code != types.ErrInvalidNetworkConfig && te.Code != types.ErrDecodingFailure) {
			t.Errorf("timeout %s: err %v, want an invalid-config error", bad, err)
		}
	}
}
