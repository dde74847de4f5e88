package cni

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func msd(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, x := range v {
		out[i] = time.Duration(x) * time.Millisecond
	}
	return out
}

// TestSummarize: nearest-rank percentiles pick measured samples, whatever
// the input order.
func TestSummarize(t *testing.T) {
	var hundred []time.Duration
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	cases := []struct {
		name          string
		in            []time.Duration
		p50, p99, max time.Duration
		mean          time.Duration
	}{
		{"one", msd(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"four unsorted", msd(4, 1, 3, 2), 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond, 2500 * time.Microsecond},
		{"hundred descending", hundred, 50 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond, 50500 * time.Microsecond},
	}
	for _, tc := range cases {
		s := Summarize(tc.in)
		if s.P50 != tc.p50 || s.P99 != tc.p99 || s.Max != tc.max || s.Mean != tc.mean || s.N != len(tc.in) {
			t.Errorf("%s: got %+v, want p50 %v p99 %v max %v mean %v", tc.name, s, tc.p50, tc.p99, tc.max, tc.mean)
		}
	}
	if s := Summarize(nil); s.N != 0 || s.P99 != 0 {
		t.Errorf("empty: %+v", s)
	}
}

// TestReport: the table names every plugin, the JSON line parses and
// carries the ratio of the first plugin to the second.
func TestReport(t *testing.T) {
	r := Report{Pods: 4, Results: []Result{
		{Plugin: "allot", Add: Summarize(msd(5, 5, 5, 10)), Del: Summarize(msd(2, 2, 2, 2))},
		{Plugin: "ptp+host-local", Add: Summarize(msd(10, 10, 10, 40)), Del: Summarize(msd(8, 8, 8, 8))},
		{Plugin: "other", Skipped: "not built"},
	}}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"allot", "ptp+host-local", "other not measured: not built", "ADD p50 0.50x p99 0.25x, DEL p50 0.25x"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	line, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Pods    int
		Plugins []struct {
			Plugin string
			Add    *struct {
				P50ms float64 `json:"p50_ms"`
			}
			Skipped string
		}
		Ratios struct {
			Of     string
			AddP50 float64 `json:"add_p50"`
		}
	}
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatalf("JSON line %s: %v", line, err)
	}
	if got.Pods != 4 || len(got.Plugins) != 3 || got.Plugins[0].Add.P50ms != 5 || got.Plugins[2].Skipped != "not built" ||
		got.Ratios.Of != "allot" || got.Ratios.AddP50 != 0.5 {
		t.Errorf("JSON line %s decoded to %+v", line, got)
	}
	if bytes.Contains(line, []byte("\n")) {
		t.Error("JSON is not one line")
	}
}
