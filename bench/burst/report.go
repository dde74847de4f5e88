package burst

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Percentiles are time-to-address quantiles in simulated seconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)].Seconds()
	}
	return Percentiles{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: s[len(s)-1].Seconds()}
}

// Result is one variant's figures. Times are simulated seconds unless the
// name says wall.
type Result struct {
	Variant string  `json:"variant"`
	System  System  `json:"system"`
	Mode    string  `json:"mode"`
	Share   float64 `json:"share"`
	// Profile is how the pods arrived (Profile.String); TTA is then from
	// each pod's own request, completion from the burst's start, and the
	// lower bound is at least the last pod's arrival.
	Profile string `json:"profile"`
	// TableError and Tenant are the variant's (Variant); Buckets names
	// awssim's bucket model (describe buckets per API or shared, refill
	// continuous or per second).
	TableError float64 `json:"table_error,omitempty"`
	Tenant     float64 `json:"tenant,omitempty"`
	Buckets    string  `json:"buckets"`
	// TenantTokens is what the other tenant took during the burst, over
	// all buckets.
	TenantTokens float64 `json:"tenant_tokens,omitempty"`
	Nodes        int     `json:"nodes"`
	PodsPerNode  int     `json:"pods_per_node"`
	Pods         int     `json:"pods"`
	Placed       int     `json:"placed"`
	TimeScale    float64 `json:"time_scale"`
	Seed         int64   `json:"seed"`
	// Status is StatusOK, StatusFailed or StatusNotRun; Error says why a
	// variant failed or was not run.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`

	// CompletionSim is when the last pod got its address, from the moment
	// every pod was requested; CompletionWall is the same on the wall.
	// When not every pod was placed (Complete false) they are the time the
	// burst was given up at, and Ratio is only a lower bound.
	Complete       bool    `json:"complete"`
	CompletionSim  float64 `json:"completion_s"`
	CompletionWall float64 `json:"completion_wall_s"`
	// LowerBoundSim is lowerbound.LowerBound of Minimum at this share (the
	// baseline: at the whole account); Ratio is completion over it (0 when
	// the bound is 0: every minimum call fits in the full buckets).
	LowerBoundSim float64 `json:"lower_bound_s"`
	Ratio         float64 `json:"ratio"`
	// TimeOptimalBoundSim is lowerbound.TimeOptimal of the pods' demand at
	// this share: the floor of any plan, however many calls it spends;
	// RatioTimeOptimal is completion over it (0 when the floor is 0).
	TimeOptimalBoundSim float64 `json:"time_optimal_bound_s"`
	RatioTimeOptimal    float64 `json:"ratio_time_optimal"`
	// IMDSBoundSim is lowerbound.TimeOptimalLag with awssim's IMDS lag: the
	// time-optimal floor when a new ENI's addresses are usable only once
	// the node's IMDS shows the attach. It is shown beside the
	// time-optimal floor, never instead of it; RatioIMDS is completion
	// over it (0 when it is 0).
	IMDSBoundSim float64 `json:"time_optimal_imds_bound_s"`
	RatioIMDS    float64 `json:"ratio_time_optimal_imds"`
	// OwnFloorSim is the system's own call-pattern floor (ownFloor): the
	// shortest time the calls it chose to make allow, bounded by OwnFloorBy
	// (EC2's buckets, its client-side limiter or its per-node loop);
	// OwnRatio is completion over it.
	OwnFloorSim float64     `json:"own_floor_s"`
	OwnFloorBy  string      `json:"own_floor_by,omitempty"`
	OwnRatio    float64     `json:"own_ratio"`
	TTA         Percentiles `json:"time_to_address_s"`
	// Attempts is ADD attempts over all pods (1 per pod without retries).
	Attempts int `json:"attempts"`
	// FailedAdds counts failed attempts by gRPC code.
	FailedAdds map[string]int `json:"failed_adds,omitempty"`
	// BaselineErrors counts the ipamd models' failed pool actions by where
	// they failed (an ENI allocation, an assign, a subnet describe).
	BaselineErrors map[string]int `json:"baseline_errors,omitempty"`
	// BaselineRestarts counts the ipamd models' failed nodeInits, each
	// followed by a restart after kubelet's CrashLoopBackOff (join and
	// warm-up included: that is when nodeInit runs).
	BaselineRestarts int64 `json:"baseline_restarts,omitempty"`

	// Throttled is RequestLimitExceeded answers during the burst; Calls
	// are awssim's request counts by action (throttled ones included),
	// Errors its other error answers.
	Throttled int64            `json:"request_limit_exceeded"`
	Calls     map[string]int64 `json:"calls"`
	Errors    map[string]int64 `json:"ec2_errors,omitempty"`
	// Minimum is the planner's fewest calls for the whole burst; Planned
	// is what the broker's own plans during the burst added up to.
	Minimum        map[string]int `json:"minimum"`
	Planned        map[string]int `json:"planned,omitempty"`
	CallsAtMinimum bool           `json:"calls_at_minimum"`

	// EtcdWrites are the broker's etcd write transactions during the burst,
	// by store method; HotPathBrokerCalls are broker RPCs made on an ADD's
	// behalf (so the etcd writes on the per-pod hot path are those RPCs'
	// writes: none when it is 0). -1 where it does not apply (baseline).
	EtcdWrites         int64            `json:"etcd_writes"`
	EtcdWritesPerPod   float64          `json:"etcd_writes_per_pod"`
	EtcdWritesByMethod map[string]int64 `json:"etcd_writes_by_method,omitempty"`
	HotPathBrokerCalls int64            `json:"hot_path_broker_calls"`
	// Idle is the etcd writes of the idle window before the burst
	// (Config.IdleWindow); nil when none was measured.
	Idle *IdleFigures `json:"idle,omitempty"`
	// RoundP50 and RoundP99 are the engine's planning rounds during the
	// burst, wall milliseconds (the bucket bound of executor.RoundBounds
	// they fall in; -1: beyond the last); Rounds is how many there were.
	Rounds   int64   `json:"rounds,omitempty"`
	RoundP50 float64 `json:"round_p50_ms,omitempty"`
	RoundP99 float64 `json:"round_p99_ms,omitempty"`
	// SlowRounds are the burst's rounds longer than executor.SlowRound,
	// and SlowRoundMs the wall time they spent by phase.
	SlowRounds  int64              `json:"slow_rounds,omitempty"`
	SlowRoundMs map[string]float64 `json:"slow_round_ms,omitempty"`
	// RoundCPUP50 and RoundCPUP99 are the same rounds' quantiles by the
	// processor time each ran (executor.Stats.RoundCPU), and
	// SlowRoundCPUMs the processor time of the slow ones: the rest of
	// their wall time they waited, mostly for a core on this machine.
	RoundCPUP50    float64 `json:"round_cpu_p50_ms,omitempty"`
	RoundCPUP99    float64 `json:"round_cpu_p99_ms,omitempty"`
	SlowRoundCPUMs float64 `json:"slow_round_cpu_ms,omitempty"`

	// BrokerCPU is the broker process's CPU seconds during the burst and
	// BrokerCPUTotal over its life (join and warm-up included);
	// BrokerPeakRSS its high-water mark. NodesCPU is the harness process
	// (agents or ipamd models, plus the kubelet stand-in) during the burst;
	// AgentPeakRSS is the harness's RSS growth from before the nodes
	// started to its peak, divided by the nodes: an upper-bound estimate
	// per agent. CloudCPU is awssim's. Zero when not measured (in-process
	// roles).
	BrokerCPU float64 `json:"broker_cpu_s"`
	// BrokerCores is BrokerCPU over the burst's wall time: near or above
	// one core, the broker could not keep up with the time scale and the
	// simulated times are stretched by the compression, not by EC2.
	BrokerCores    float64 `json:"broker_cores"`
	BrokerCPUTotal float64 `json:"broker_cpu_total_s"`
	BrokerPeakRSS  int64   `json:"broker_peak_rss_bytes"`
	// BrokerMem are the broker process's memory peaks by kind.
	BrokerMem *MemPeaks `json:"broker_mem,omitempty"`
	// RefusedCalls is how many agent calls the broker refused as busy from
	// the burst's start to the end of the run.
	RefusedCalls int64 `json:"refused_calls,omitempty"`
	// EtcdPeakRSS and EtcdCPUTotal are etcd's high-water mark and CPU
	// seconds over its life when it runs apart from the broker
	// (Config.SeparateEtcd); zero when the broker embeds it, and then
	// BrokerPeakRSS includes etcd's memory.
	EtcdPeakRSS  int64   `json:"etcd_peak_rss_bytes,omitempty"`
	EtcdCPUTotal float64 `json:"etcd_cpu_total_s,omitempty"`
	NodesCPU     float64 `json:"nodes_cpu_s"`
	AgentPeakRSS int64   `json:"agent_peak_rss_bytes"`
	CloudCPU     float64 `json:"cloud_cpu_s"`

	// WarmShortAfter is how many nodes were still short of their warm
	// targets when the wait for them ended (two simulated minutes after the
	// last pod, or with Config.WarmUntilFloor after the floor of the
	// top-ups); WarmShortDetail describes a few.
	WarmShortAfter  int    `json:"warm_short_after"`
	WarmShortDetail string `json:"warm_short_detail,omitempty"`
	// WarmSim is when every pool was back at its warm targets, from the
	// burst's start (simulated s; 0: not within the wait); WarmFloorSim is
	// the bucket model's floor for the minimum's calls, the top-ups
	// included, which no run can be warm before.
	WarmSim      float64 `json:"warm_s,omitempty"`
	WarmFloorSim float64 `json:"warm_floor_s,omitempty"`

	// SetupWall is the wall time of join and warm-up.
	SetupWall float64 `json:"setup_wall_s"`
	// SetupDescribeInstances is how many DescribeInstances calls join and
	// warm-up made: for allot, attestation and registration checking each
	// node's claims against EC2 (one cached, batched answer per node at
	// most); for the ipamd baseline, its own per-node calls.
	SetupDescribeInstances int64 `json:"setup_describe_instances"`
	// UpDown is the way back down and up again after the burst
	// (Config.UpDown); nil when not run.
	UpDown *UpDownFigures `json:"updown,omitempty"`
	// Problems are correctness failures: unplaced pods, duplicate
	// addresses, addresses EC2 doesn't put on the node, hostnet errors.
	Problems []string `json:"problems,omitempty"`
}

// IdleFigures are the broker's etcd writes while the fleet sits idle,
// per simulated second.
type IdleFigures struct {
	// Seconds is the window, simulated.
	Seconds float64 `json:"seconds"`
	// WritesPerSec are the broker store's write calls (transactions and
	// lease grants and renewals), RevisionsPerSec etcd's own count of
	// transactions that changed a key.
	WritesPerSec    float64            `json:"writes_per_s"`
	RevisionsPerSec float64            `json:"revisions_per_s"`
	ByMethod        map[string]float64 `json:"by_method_per_s,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemTotal  string `json:"mem_total"`
	GoVersion string `json:"go_version"`
	Kernel    string `json:"kernel"`
}

// Report is the whole run.
type Report struct {
	Machine  Machine   `json:"machine"`
	Started  time.Time `json:"started"`
	WallTime float64   `json:"wall_s"`
	Results  []Result  `json:"results"`
	// Summary is the results over their seeds (Summaries), filled by
	// WriteJSON.
	Summary []Summary `json:"summaries,omitempty"`
}

// machine reads /proc for the record.
func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// mutatingActions are the calls that change EC2 state: the ones the
// minimum is about.
var mutatingActions = []string{
	"CreateNetworkInterface", "AttachNetworkInterface", "ModifyNetworkInterfaceAttribute",
	"AssignPrivateIpAddresses", "UnassignPrivateIpAddresses", "DetachNetworkInterface", "DeleteNetworkInterface",
}

// atMinimum reports whether every mutating call count equals the minimum.
func atMinimum(calls map[string]int64, minimum map[string]int) bool {
	for _, a := range mutatingActions {
		if calls[a] != int64(minimum[a]) {
			return false
		}
	}
	return true
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// WriteTable prints the report as tables, one column per variant.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(Result) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, x := range r.Results {
			fmt.Fprintf(tw, "%s\t", f(x))
		}
		fmt.Fprintln(tw)
	}
	row("variant", func(x Result) string { return x.Variant })
	row("status", func(x Result) string { return x.Status })
	row("nodes / seed", func(x Result) string { return fmt.Sprintf("%d / %d", x.Nodes, x.Seed) })
	row("awssim buckets", func(x Result) string { return x.Buckets })
	row("table error / other tenant", func(x Result) string {
		return fmt.Sprintf("%+g%% / %g%%", 100*x.TableError, 100*x.Tenant)
	})
	row("pods placed", func(x Result) string { return fmt.Sprintf("%d/%d", x.Placed, x.Pods) })
	row("time scale", func(x Result) string { return fmt.Sprintf("%g", x.TimeScale) })
	more := func(x Result) string {
		if x.Complete {
			return ""
		}
		return ">"
	}
	row("completion (sim s)", func(x Result) string { return fmt.Sprintf("%s%.1f", more(x), x.CompletionSim) })
	row("completion (wall s)", func(x Result) string { return fmt.Sprintf("%s%.1f", more(x), x.CompletionWall) })
	row("lower bound (sim s)", func(x Result) string { return fmt.Sprintf("%.1f", x.LowerBoundSim) })
	row("completion / bound", func(x Result) string {
		if x.LowerBoundSim == 0 {
			return "-" // every call fits in the full buckets
		}
		return fmt.Sprintf("%s%.3f", more(x), x.Ratio)
	})
	row("own call-pattern floor (sim s)", func(x Result) string {
		if x.OwnFloorBy == "" {
			return "-"
		}
		return fmt.Sprintf("%.1f (%s)", x.OwnFloorSim, x.OwnFloorBy)
	})
	row("completion / own floor", func(x Result) string {
		if x.OwnFloorSim == 0 {
			return "-"
		}
		return fmt.Sprintf("%s%.3f", more(x), x.OwnRatio)
	})
	row("time-optimal bound (sim s)", func(x Result) string { return fmt.Sprintf("%.1f", x.TimeOptimalBoundSim) })
	row("completion / time-optimal", func(x Result) string {
		if x.TimeOptimalBoundSim == 0 {
			return "-"
		}
		return fmt.Sprintf("%s%.3f", more(x), x.RatioTimeOptimal)
	})
	row("time-optimal with IMDS lag (sim s)", func(x Result) string { return fmt.Sprintf("%.1f", x.IMDSBoundSim) })
	row("completion / it", func(x Result) string {
		if x.IMDSBoundSim == 0 {
			return "-"
		}
		return fmt.Sprintf("%s%.3f", more(x), x.RatioIMDS)
	})
	row("time to address p50", func(x Result) string { return fmt.Sprintf("%.1f", x.TTA.P50) })
	row("p90", func(x Result) string { return fmt.Sprintf("%.1f", x.TTA.P90) })
	row("p99", func(x Result) string { return fmt.Sprintf("%.1f", x.TTA.P99) })
	row("ADD attempts", func(x Result) string { return fmt.Sprint(x.Attempts) })
	row("RequestLimitExceeded", func(x Result) string { return fmt.Sprint(x.Throttled) })
	actions := map[string]bool{}
	for _, x := range r.Results {
		for a := range x.Calls {
			actions[a] = true
		}
		for a := range x.Minimum {
			actions[a] = true
		}
	}
	for _, a := range slices.Sorted(maps.Keys(actions)) {
		row(a+" (min)", func(x Result) string {
			if m, ok := x.Minimum[a]; ok {
				return fmt.Sprintf("%d (%d)", x.Calls[a], m)
			}
			return fmt.Sprint(x.Calls[a])
		})
	}
	row("calls = minimum", func(x Result) string { return fmt.Sprint(x.CallsAtMinimum) })
	row("etcd writes / pod", func(x Result) string {
		if x.System == SystemIPAMD {
			return "-"
		}
		return fmt.Sprintf("%.3f", x.EtcdWritesPerPod)
	})
	row("hot-path broker calls", func(x Result) string {
		if x.HotPathBrokerCalls < 0 {
			return "-"
		}
		return fmt.Sprint(x.HotPathBrokerCalls)
	})
	row("broker CPU s (burst/total)", func(x Result) string {
		if x.System == SystemIPAMD {
			return "-"
		}
		return fmt.Sprintf("%.1f/%.1f", x.BrokerCPU, x.BrokerCPUTotal)
	})
	row("broker cores (burst)", func(x Result) string {
		if x.System == SystemIPAMD {
			return "-"
		}
		return fmt.Sprintf("%.2f", x.BrokerCores)
	})
	row("broker peak RSS", func(x Result) string {
		if x.System == SystemIPAMD {
			return "-"
		}
		return mib(x.BrokerPeakRSS)
	})
	row("nodes CPU s (burst)", func(x Result) string { return fmt.Sprintf("%.1f", x.NodesCPU) })
	row("per-node peak RSS (est.)", func(x Result) string { return mib(x.AgentPeakRSS) })
	row("ipamd restarts (CrashLoopBackOff)", func(x Result) string {
		if x.System != SystemIPAMD {
			return "-"
		}
		return fmt.Sprint(x.BaselineRestarts)
	})
	row("nodes not warm after", func(x Result) string { return fmt.Sprint(x.WarmShortAfter) })
	row("all warm again (sim s) / floor", func(x Result) string {
		if x.WarmSim == 0 {
			return fmt.Sprintf("- / %.1f", x.WarmFloorSim)
		}
		return fmt.Sprintf("%.1f / %.1f", x.WarmSim, x.WarmFloorSim)
	})
	row("problems", func(x Result) string { return fmt.Sprint(len(x.Problems)) })
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		if x.Error != "" {
			fmt.Fprintf(w, "%s %s: %s\n", x.Variant, strings.ToUpper(x.Status), x.Error)
		}
		if len(x.EtcdWritesByMethod) > 0 {
			keys := slices.Sorted(maps.Keys(x.EtcdWritesByMethod))
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%d", k, x.EtcdWritesByMethod[k]))
			}
			fmt.Fprintf(w, "%s etcd writes: %s\n", x.Variant, strings.Join(parts, " "))
		}
		if len(x.FailedAdds) > 0 {
			fmt.Fprintf(w, "%s failed ADD attempts: %v\n", x.Variant, x.FailedAdds)
		}
		if len(x.BaselineErrors) > 0 {
			fmt.Fprintf(w, "%s failed ipamd pool actions: %v\n", x.Variant, x.BaselineErrors)
		}
		if x.WarmShortAfter > 0 {
			fmt.Fprintf(w, "%s not warm again after the burst: %s\n", x.Variant, x.WarmShortDetail)
		}
		for _, p := range x.Problems[:min(len(x.Problems), 10)] {
			fmt.Fprintf(w, "%s PROBLEM: %s\n", x.Variant, p)
		}
	}
	return nil
}

// ResultHeader is the header of the one-line results WriteLine prints.
const ResultHeader = "# result: variant nodes seed scale status placed completion_s bound_s ratio own_floor_s own_ratio p99_s RequestLimitExceeded"

// WriteLine prints the result as one line under ResultHeader, then the
// result alone as one JSON line ({"result": …}), so a run that dies later
// still leaves this variant's figures on stdout.
func (x Result) WriteLine(w io.Writer) error {
	ratio := "-"
	if x.LowerBoundSim > 0 {
		ratio = fmt.Sprintf("%.3f", x.Ratio)
		if !x.Complete {
			ratio = ">" + ratio
		}
	}
	own := "-"
	if x.OwnFloorSim > 0 {
		own = fmt.Sprintf("%.3f", x.OwnRatio)
	}
	line := fmt.Sprintf("result: %s %d %d %g %s %d/%d %.1f %.1f %s %.1f %s %.1f %d",
		x.Variant, x.Nodes, x.Seed, x.TimeScale, x.Status, x.Placed, x.Pods, x.CompletionSim, x.LowerBoundSim, ratio,
		x.OwnFloorSim, own, x.TTA.P99, x.Throttled)
	if x.Error != "" {
		line += " error: " + x.Error
	}
	b, err := json.Marshal(struct {
		Result Result `json:"result"`
	}{x})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n%s\n", line, b)
	return err
}

// Failed counts the results that are not StatusOK.
func (r Report) Failed() int {
	n := 0
	for _, x := range r.Results {
		if x.Status != StatusOK {
			n++
		}
	}
	return n
}

// WriteJSON writes the report as one line.
func (r Report) WriteJSON(w io.Writer) error {
	r.Summary = r.Summaries()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
