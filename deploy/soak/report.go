package soak

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// Result is what a soak run measured.
type Result struct {
	Seed int64 `json:"seed"`
	// Ran is how long the driver and the faults ran.
	Ran time.Duration `json:"-"`
	// Ops counts CNI operations by verb (ADD, DEL, CHECK, GC), their
	// failures (ADD_failed, ...) and the pod replacements.
	Ops map[string]int `json:"ops"`
	// Faults counts the faults injected by kind.
	Faults map[string]int `json:"faults"`
	// Violations counts the broken invariants by name; all must be 0.
	Violations map[string]int `json:"violations"`
	// Details say what broke (the first 50).
	Details []string `json:"details,omitempty"`
	// Recoveries is each fault's time from being lifted to a pod ADD
	// succeeding after it.
	Recoveries []Recovery `json:"recoveries"`
	// Checks is how many passes the continuous checker made.
	Checks int `json:"checks"`
	// RecordsBeforeGC is how many pod records the agents still held after
	// every DEL, before the GC pass.
	RecordsBeforeGC int `json:"recordsBeforeGC"`
	// IdleSeconds is how long the cluster took to be idle after GC.
	IdleSeconds float64 `json:"idleSeconds"`
	// CheckSeconds is how long `allotctl check` took to come back clean
	// after that.
	CheckSeconds float64 `json:"checkSeconds"`
	// Err is set when the run broke.
	Err string `json:"error,omitempty"`
}

// Recovery is one fault's recovery.
type Recovery struct {
	Kind      string  `json:"kind"`
	Detail    string  `json:"detail"`
	Seconds   float64 `json:"seconds"`
	Recovered bool    `json:"recovered"`
}

// TotalViolations sums them.
func (r *Result) TotalViolations() int {
	n := 0
	for _, v := range r.Violations {
		n += v
	}
	return n
}

// OK says the run found nothing broken and did not break.
func (r *Result) OK() bool { return r.Err == "" && r.TotalViolations() == 0 }

// WriteText prints the table.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "\nsoak ran %v (seed %d), %d invariant passes\n\n", r.Ran.Round(time.Second), r.Seed, r.Checks)
	fmt.Fprintf(w, "%-28s %8s\n", "operation", "count")
	for _, k := range slices.Sorted(maps.Keys(r.Ops)) {
		fmt.Fprintf(w, "%-28s %8d\n", k, r.Ops[k])
	}
	fmt.Fprintf(w, "\n%-28s %8s %8s %8s %8s\n", "fault", "count", "rec p50", "rec max", "unrec")
	for _, k := range FaultKinds {
		var secs []float64
		unrec := 0
		for _, rc := range r.Recoveries {
			if rc.Kind != k {
				continue
			}
			if rc.Recovered {
				secs = append(secs, rc.Seconds)
			} else {
				unrec++
			}
		}
		slices.Sort(secs)
		p50, mx := "-", "-"
		if len(secs) > 0 {
			p50, mx = fmt.Sprintf("%.2fs", secs[len(secs)/2]), fmt.Sprintf("%.2fs", secs[len(secs)-1])
		}
		fmt.Fprintf(w, "%-28s %8d %8s %8s %8d\n", k, r.Faults[k], p50, mx, unrec)
	}
	fmt.Fprintf(w, "\n%-28s %8s\n", "invariant", "violated")
	for _, k := range Invariants {
		fmt.Fprintf(w, "%-28s %8d\n", k, r.Violations[k])
	}
	for _, d := range r.Details {
		fmt.Fprintf(w, "  %s\n", d)
	}
	fmt.Fprintf(w, "\npod records left after every DEL (before GC): %d; idle %.1fs after GC; allotctl check clean %.1fs later\n",
		r.RecordsBeforeGC, r.IdleSeconds, r.CheckSeconds)
	if r.Err != "" {
		fmt.Fprintf(w, "run broke: %s\n", r.Err)
	}
}

// WriteJSON prints the result as one JSON line.
func (r *Result) WriteJSON(w io.Writer) error {
	v := struct {
		*Result
		Seconds float64 `json:"seconds"`
		OK      bool    `json:"ok"`
	}{r, r.Ran.Seconds(), r.OK()}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
