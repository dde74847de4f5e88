package cni

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// Result is one plugin's measurements.
type Result struct {
	// Plugin names what was measured ("allot", "ptp+host-local").
	Plugin string
	Add    Summary
	Del    Summary
	// Status, when measured, is STATUS through the same binary: one exec
	// and one call that does no work, the floor under ADD and DEL.
	Status Summary
	// Skipped, when set, says why the plugin was not measured.
	Skipped string
}

// Report is one run: every plugin measured in it, and its setting.
type Report struct {
	Pods    int
	Results []Result
	// AgentAdds and AgentDels are allot's agent's account of the ADD phase
	// (STATUS included) and of the DEL phase; zero when not measured.
	AgentAdds, AgentDels AgentSide
}

// WriteTable prints a human-readable table of p50/p90/p99 per plugin and
// verb, and the ratios of every plugin to the first one measured after it
// (the reference).
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "plugin\tverb\tn\tp50 ms\tp90 ms\tp99 ms\tmean ms\tmax ms\t\n")
	for _, res := range r.Results {
		if res.Skipped != "" {
			fmt.Fprintf(tw, "%s\t-\t0\t-\t-\t-\t-\t-\t\n", res.Plugin)
			continue
		}
		for _, v := range []struct {
			verb string
			s    Summary
		}{{"ADD", res.Add}, {"DEL", res.Del}, {"STATUS", res.Status}} {
			if v.s.N == 0 {
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", res.Plugin, v.verb, v.s.N,
				ms(v.s.P50), ms(v.s.P90), ms(v.s.P99), ms(v.s.Mean), ms(v.s.Max))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Skipped != "" {
			fmt.Fprintf(w, "%s not measured: %s\n", res.Plugin, res.Skipped)
		}
	}
	if rt := r.ratios(); rt != nil {
		fmt.Fprintf(w, "%s / %s: ADD p50 %.2fx p99 %.2fx, DEL p50 %.2fx p99 %.2fx\n", rt.Of, rt.To,
			rt.AddP50, rt.AddP99, rt.DelP50, rt.DelP99)
	}
	if a, d := r.AgentAdds, r.AgentDels; a.Add > 0 || d.Del > 0 {
		fmt.Fprintf(w, "allot's agent, serving (mean): ADD %.3f ms, DEL %.3f ms; "+
			"checkpoint writes %d in the ADDs (mean %.3f ms), %d in the DELs (mean %.3f ms)\n",
			ms(a.Add), ms(d.Del), a.Writes, ms(a.Write), d.Writes, ms(d.Write))
	}
	return nil
}

// Ratios compares two plugins' latencies (Of divided by To); below 1 means
// Of is faster.
type Ratios struct {
	Of     string  `json:"of"`
	To     string  `json:"to"`
	AddP50 float64 `json:"add_p50"`
	AddP99 float64 `json:"add_p99"`
	DelP50 float64 `json:"del_p50"`
	DelP99 float64 `json:"del_p99"`
}

// ratios compares the first two measured plugins, or returns nil.
func (r Report) ratios() *Ratios {
	var m []Result
	for _, res := range r.Results {
		if res.Skipped == "" && res.Add.N > 0 && res.Del.N > 0 {
			m = append(m, res)
		}
	}
	if len(m) < 2 {
		return nil
	}
	div := func(a, b Summary, p func(Summary) float64) float64 {
		if p(b) == 0 {
			return 0
		}
		return round2(p(a) / p(b))
	}
	p50 := func(s Summary) float64 { return float64(s.P50) }
	p99 := func(s Summary) float64 { return float64(s.P99) }
	return &Ratios{Of: m[0].Plugin, To: m[1].Plugin,
		AddP50: div(m[0].Add, m[1].Add, p50), AddP99: div(m[0].Add, m[1].Add, p99),
		DelP50: div(m[0].Del, m[1].Del, p50), DelP99: div(m[0].Del, m[1].Del, p99)}
}

func round2(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

type jsonSummary struct {
	N      int     `json:"n"`
	P50ms  float64 `json:"p50_ms"`
	P90ms  float64 `json:"p90_ms"`
	P99ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// jsonAgent is Report's AgentAdds and AgentDels: means in ms.
type jsonAgent struct {
	AddMs      float64 `json:"add_mean_ms"`
	DelMs      float64 `json:"del_mean_ms"`
	AddWrites  int     `json:"add_phase_checkpoint_writes"`
	AddWriteMs float64 `json:"add_phase_checkpoint_write_mean_ms"`
	DelWrites  int     `json:"del_phase_checkpoint_writes"`
	DelWriteMs float64 `json:"del_phase_checkpoint_write_mean_ms"`
}

type jsonPlugin struct {
	Plugin  string       `json:"plugin"`
	Add     *jsonSummary `json:"add,omitempty"`
	Del     *jsonSummary `json:"del,omitempty"`
	Status  *jsonSummary `json:"status,omitempty"`
	Skipped string       `json:"skipped,omitempty"`
}

// JSON is the report as one line of JSON, for scripts that track it.
func (r Report) JSON() ([]byte, error) {
	js := func(s Summary) *jsonSummary {
		return &jsonSummary{N: s.N, P50ms: ms(s.P50), P90ms: ms(s.P90), P99ms: ms(s.P99), MeanMs: ms(s.Mean), MaxMs: ms(s.Max)}
	}
	out := struct {
		Bench   string       `json:"bench"`
		Pods    int          `json:"pods"`
		Plugins []jsonPlugin `json:"plugins"`
		Ratios  *Ratios      `json:"ratios,omitempty"`
		Agent   *jsonAgent   `json:"allot_agent,omitempty"`
	}{Bench: "cni-latency", Pods: r.Pods, Ratios: r.ratios()}
	if a, d := r.AgentAdds, r.AgentDels; a.Add > 0 || d.Del > 0 {
		out.Agent = &jsonAgent{AddMs: ms(a.Add), DelMs: ms(d.Del),
			AddWrites: a.Writes, AddWriteMs: ms(a.Write), DelWrites: d.Writes, DelWriteMs: ms(d.Write)}
	}
	for _, res := range r.Results {
		p := jsonPlugin{Plugin: res.Plugin, Skipped: res.Skipped}
		if res.Skipped == "" {
			p.Add, p.Del = js(res.Add), js(res.Del)
			if res.Status.N > 0 {
				p.Status = js(res.Status)
			}
		}
		out.Plugins = append(out.Plugins, p)
	}
	return json.Marshal(out)
}
