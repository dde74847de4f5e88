package executor

import (
	"testing"
	"time"

	"github.com/allotnet/allot/broker/ec2client"
)

// A refusal that would repeat keeps its node backed off even when a task
// planned beside it (an assign next to the refused create) succeeds after
// it; an ordinary failure's back-off is lifted by a success.
func TestRefusalBackoffOutlivesASiblingSuccess(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	refused := &ec2client.APIError{Action: "AttachNetworkInterface", Code: "InvalidParameterCombination"}
	failed := &ec2client.APIError{Action: "AssignPrivateIpAddresses", Code: "InternalError"}
	for _, tc := range []struct {
		name   string
		first  error
		lifted bool
	}{
		{"refusal", refused, false},
		{"failure", failed, true},
	} {
		rs := newRunState(nil)
		rs.busy["i-1"] = 2
		rs.finished(&task{node: "i-1"}, tc.first, false, now, time.Second)
		rs.finished(&task{node: "i-1"}, nil, false, now.Add(time.Millisecond), time.Second)
		_, backedOff := rs.backoff["i-1"]
		if backedOff == tc.lifted {
			t.Errorf("%s then a success: backed off %v, want %v", tc.name, backedOff, !tc.lifted)
		}
	}
}
