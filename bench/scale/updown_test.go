package scale

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/allotnet/allot/bench/burst"
)

func TestWriteUpDown(t *testing.T) {
	r := burst.Result{Nodes: 2, Pods: 10, Status: burst.StatusOK, UpDown: &burst.UpDownFigures{
		DownCalls:   map[string]int64{"DetachNetworkInterface": 6, "UnassignPrivateIpAddresses": 6},
		DownMinimum: map[string]int{"DetachNetworkInterface": 6},
		DownExtra:   map[string]int64{"UnassignPrivateIpAddresses": 6},
		InUseFreed:  1, Problems: []string{"address freed"},
		Up: burst.UpFigures{Ratio: 1.2, Calls: map[string]int64{"CreateNetworkInterface": 6}},
	}}
	l := NewUpDownLine(r, "1 1 1")
	if l.InUseFreed != 1 || l.SecondRatio != 1.2 || len(l.Problems) != 1 {
		t.Errorf("line %+v", l)
	}
	var b bytes.Buffer
	if err := WriteUpDown(&b, l); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"UnassignPrivateIpAddresses", "DeleteNetworkInterface", "in-use addresses freed", "problem: address freed", "CreateNetworkInterface=6"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var back UpDownLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &back); err != nil || back.UpDown == nil || back.InUseFreed != 1 {
		t.Errorf("last line is not the JSON figures: %v %+v", err, back)
	}
}
