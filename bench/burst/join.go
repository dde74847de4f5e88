package burst

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/allotnet/allot/awssim"
)

// joinSome joins a batch of nodes. A node whose agent did not start (after
// its retries) is noted in dropped and left out of the run, which goes on
// with the others and reports it; more than one in a hundred of all nodes
// is the run's failure, since something other than a slow moment is wrong.
func joinSome(ctx context.Context, f fleet, batch []awssim.AdminInstance, dropped map[string]error, nodes int) error {
	err := f.join(ctx, batch)
	var je *JoinError
	if !errors.As(err, &je) {
		return err
	}
	for _, fj := range je.Failed {
		dropped[fj.Instance] = fj.Err
	}
	if len(dropped) > max(1, nodes/100) {
		return fmt.Errorf("%d of %d nodes did not join: %w", len(dropped), nodes, err)
	}
	return nil
}

// withoutDropped returns the instances without the dropped ones, and how
// many of the first early remain.
func withoutDropped(insts []awssim.AdminInstance, early int, dropped map[string]error) ([]awssim.AdminInstance, int) {
	keep := func(in awssim.AdminInstance) bool { _, gone := dropped[in.ID]; return !gone }
	var out []awssim.AdminInstance
	for _, in := range insts[:early] {
		if keep(in) {
			out = append(out, in)
		}
	}
	n := len(out)
	for _, in := range insts[early:] {
		if keep(in) {
			out = append(out, in)
		}
	}
	return out, n
}

// droppedProblems says which nodes did not join, ten at most by name.
func droppedProblems(dropped map[string]error) []string {
	ids := make([]string, 0, len(dropped))
	for id := range dropped {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []string
	for _, id := range ids[:min(len(ids), 10)] {
		out = append(out, fmt.Sprintf("node %s did not join and was left out: %v", id, dropped[id]))
	}
	if len(ids) > 10 {
		out = append(out, fmt.Sprintf("... and %d more nodes that did not join", len(ids)-10))
	}
	return out
}
