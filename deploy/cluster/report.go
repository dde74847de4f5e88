package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Report is what the demo measured. Every number comes from a running
// system: time-to-address from the runtime's ADD calls, ENIs and addresses
// from awssim's state, EC2 calls from awssim's admin counters, budgets from
// `allotctl budgets`, connectivity from real packets.
type Report struct {
	Run          string  `json:"run"`
	Nodes        int     `json:"nodes"`
	InstanceType string  `json:"instance_type"`
	Mode         string  `json:"mode"`
	TimeScale    float64 `json:"time_scale"`
	PodsPerNode  int     `json:"pods_per_node"`
	// Parallel is how many ADDs each node's runtime ran at once (0: the
	// whole burst at once).
	Parallel int `json:"parallel_per_node"`
	Pods     int `json:"pods"`
	// PodsWithAddress is the pods whose ADD returned an address.
	PodsWithAddress int `json:"pods_with_address"`
	// StartSeconds is from the start to every agent ready with its warm
	// pool filled; BurstSeconds from the burst's first ADD to its last
	// address.
	StartSeconds float64 `json:"start_seconds"`
	BurstSeconds float64 `json:"burst_seconds"`
	// TimeToAddress is each pod's ADD (retries included), in ms.
	TimeToAddress Percentiles `json:"time_to_address_ms"`
	// AddRetries counts ADDs answered "try again later".
	AddRetries int `json:"add_retries"`
	// ENIs and Addresses are attached to the nodes once every pod had its
	// address (primary ENIs included; addresses are those pods can use).
	ENIs      int        `json:"enis"`
	Addresses int        `json:"addresses"`
	PerNode   []NodeLine `json:"per_node"`
	// EC2 calls while nodes joined, during the burst, and while pods were
	// deleted and the surplus went back.
	EC2Join     EC2Calls `json:"ec2_join"`
	EC2Burst    EC2Calls `json:"ec2_burst"`
	EC2Teardown EC2Calls `json:"ec2_teardown"`
	// Budgets are `allotctl budgets -o json` at the peak.
	Budgets      json.RawMessage `json:"budgets,omitempty"`
	BudgetsTable string          `json:"-"`
	// With custom networking: the pod networks set at start, `allotctl
	// pod-networks list`, and where each pod's address came from at the
	// peak (the EC2 API's view).
	PodNetworks      []PodNetwork    `json:"pod_networks,omitempty"`
	PodNetworksTable string          `json:"-"`
	Origins          []AddressOrigin `json:"address_origins,omitempty"`
	// CheckTable is `allotctl check` at the end, after every pod was
	// deleted.
	CheckTable string `json:"-"`
	// After deletion: ENIs and addresses left, and how long it took to
	// get back within warm targets.
	IdleENIs      int     `json:"idle_enis"`
	IdleAddresses int     `json:"idle_addresses"`
	SettleSeconds float64 `json:"settle_seconds"`
	Checks        []Check `json:"checks"`
	Passed        bool    `json:"passed"`
}

// NodeLine is one node at the peak.
type NodeLine struct {
	Name       string `json:"name"`
	InstanceID string `json:"instance_id"`
	SubnetID   string `json:"subnet_id"`
	PrimaryIP  string `json:"primary_ip"`
	Pods       int    `json:"pods"`
	ENIs       int    `json:"enis"`
	Addresses  int    `json:"addresses"`
}

// Check is one verification and its outcome.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

func (r *Report) check(name string, ok bool, detail string, a ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(detail, a...)})
}

// finish sets Passed: every check passed.
func (r *Report) finish() {
	r.Passed = len(r.Checks) > 0
	for _, c := range r.Checks {
		r.Passed = r.Passed && c.OK
	}
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) {
	layout := ""
	if len(r.PodNetworks) > 0 {
		layout = ", custom networking"
	}
	fmt.Fprintf(w, "\n== allot demo %s: %d × %s, %s mode%s, time scale %g\n\n", r.Run, r.Nodes, r.InstanceType, r.Mode, layout, r.TimeScale)
	par := "all at once"
	if r.Parallel > 0 {
		par = fmt.Sprintf("%d at a time per node", r.Parallel)
	}
	fmt.Fprintf(w, "pods:             %d of %d got an address (%d per node, ADDs %s; %d ADD retries)\n",
		r.PodsWithAddress, r.Pods, r.PodsPerNode, par, r.AddRetries)
	fmt.Fprintf(w, "time to address:  p50 %.1f ms   p99 %.1f ms   max %.1f ms   (burst of %d ADDs done in %.2f s)\n",
		r.TimeToAddress.P50, r.TimeToAddress.P99, r.TimeToAddress.Max, r.Pods, r.BurstSeconds)
	fmt.Fprintf(w, "cluster start:    %.2f s to every agent ready with a warm pool\n", r.StartSeconds)
	fmt.Fprintf(w, "at peak:          %d ENIs, %d pod addresses attached (EC2, primary ENIs included)\n\n", r.ENIs, r.Addresses)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tINSTANCE\tSUBNET\tPRIMARY IP\tPODS\tENIS\tADDRESSES")
	for _, n := range r.PerNode {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\n", n.Name, n.InstanceID, n.SubnetID, n.PrimaryIP, n.Pods, n.ENIs, n.Addresses)
	}
	_ = tw.Flush()
	r.writeCustomNetworking(w)

	fmt.Fprintln(w, "\nEC2 calls (awssim admin counters):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tJOIN\tBURST\tTEARDOWN\tTOTAL")
	actions := map[string]bool{}
	for _, p := range []EC2Calls{r.EC2Join, r.EC2Burst, r.EC2Teardown} {
		for a := range p.ByAction {
			actions[a] = true
		}
	}
	for _, a := range sortedKeys(actions) {
		j, b, t := r.EC2Join.ByAction[a], r.EC2Burst.ByAction[a], r.EC2Teardown.ByAction[a]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", a, j, b, t, j+b+t)
	}
	fmt.Fprintf(tw, "all\t%d\t%d\t%d\t%d\n", r.EC2Join.Total, r.EC2Burst.Total, r.EC2Teardown.Total,
		r.EC2Join.Total+r.EC2Burst.Total+r.EC2Teardown.Total)
	fmt.Fprintf(tw, "throttled\t%d\t%d\t%d\t%d\n", r.EC2Join.Throttled, r.EC2Burst.Throttled, r.EC2Teardown.Throttled,
		r.EC2Join.Throttled+r.EC2Burst.Throttled+r.EC2Teardown.Throttled)
	fmt.Fprintf(tw, "errors\t%d\t%d\t%d\t%d\n", r.EC2Join.Errors, r.EC2Burst.Errors, r.EC2Teardown.Errors,
		r.EC2Join.Errors+r.EC2Burst.Errors+r.EC2Teardown.Errors)
	_ = tw.Flush()

	if r.BudgetsTable != "" {
		fmt.Fprintf(w, "\nallotctl budgets (at peak):\n%s", r.BudgetsTable)
	}
	fmt.Fprintf(w, "\nafter deleting every pod: %d ENIs, %d addresses left (back within warm targets in %.2f s)\n",
		r.IdleENIs, r.IdleAddresses, r.SettleSeconds)
	if r.CheckTable != "" {
		fmt.Fprintf(w, "\nallotctl check:\n%s", r.CheckTable)
	}
	fmt.Fprintln(w)
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s", mark, c.Name)
		if c.Detail != "" {
			fmt.Fprintf(w, ": %s", strings.ReplaceAll(c.Detail, "\n", "\n      "))
		}
		fmt.Fprintln(w)
	}
	verdict := "every check passed"
	if !r.Passed {
		verdict = "SOME CHECKS FAILED"
	}
	fmt.Fprintf(w, "\n%s\n", verdict)
}

// WriteJSON prints the report as one JSON line.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// summarize lists up to n problems, and how many more there were.
func summarize(problems []string, n int) string {
	if len(problems) <= n {
		return strings.Join(problems, "; ")
	}
	return strings.Join(slices.Clone(problems[:n]), "; ") + fmt.Sprintf("; and %d more", len(problems)-n)
}
