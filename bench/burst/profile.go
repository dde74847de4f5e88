package burst

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Profile is how the burst's pods arrive.
type Profile struct {
	// Kind is ProfileAll, ProfileRamp or ProfileJoin.
	Kind string
	// Rate is the ramp's pods per simulated second, cluster-wide.
	Rate float64
	// Late is the fraction of nodes that join during the burst (join).
	Late float64
}

// The arrival profiles.
const (
	// ProfileAll requests every pod at the same instant.
	ProfileAll = "all"
	// ProfileRamp requests Rate pods a second, cluster-wide, spread over
	// the nodes in turn, as a Deployment scaled up through the scheduler.
	ProfileRamp = "ramp"
	// ProfileJoin has a fraction of the nodes join during the burst, in
	// four equal batches lateJoinEvery apart from its start; the pods
	// bound to a late node are requested when it has joined, the others at
	// once.
	ProfileJoin = "join"
)

// lateJoinEvery is how far apart the late nodes' batches join.
const lateJoinEvery = 10 * time.Second

// DefaultProfiles is the profiles a full run measures.
const DefaultProfiles = "all,ramp=100,join=0.2"

// String is how names and tables show the profile.
func (p Profile) String() string {
	switch p.Kind {
	case ProfileRamp:
		return fmt.Sprintf("ramp=%g/s", p.Rate)
	case ProfileJoin:
		return fmt.Sprintf("join=%g%%", 100*p.Late)
	}
	return ProfileAll
}

// ParseProfiles reads comma-separated profiles: all, ramp=PODS_PER_S,
// join=FRACTION.
func ParseProfiles(s string) ([]Profile, error) {
	var out []Profile
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		kind, arg, _ := strings.Cut(e, "=")
		p := Profile{Kind: kind}
		var err error
		switch kind {
		case ProfileAll:
		case ProfileRamp:
			if p.Rate, err = strconv.ParseFloat(arg, 64); err != nil || !(p.Rate > 0) {
				return nil, fmt.Errorf("profile %q: want ramp=PODS_PER_SECOND, a positive number", e)
			}
		case ProfileJoin:
			if p.Late, err = strconv.ParseFloat(arg, 64); err != nil || !(p.Late > 0 && p.Late < 1) {
				return nil, fmt.Errorf("profile %q: want join=FRACTION of nodes joining late, in (0, 1)", e)
			}
		default:
			return nil, fmt.Errorf("profile %q: want all, ramp=PODS_PER_SECOND or join=FRACTION", e)
		}
		out = append(out, p)
	}
	return out, nil
}

// lateNodes is how many of n nodes join during the burst.
func (p Profile) lateNodes(n int) int {
	if p.Kind != ProfileJoin {
		return 0
	}
	return min(max(int(p.Late*float64(n)+0.5), 1), n-1)
}

// joinAt is when late node i (0-based among the late ones, of late) joins,
// simulated time from the burst's start.
func joinAt(i, late int) time.Duration {
	per := max((late+3)/4, 1)
	return time.Duration(i/per) * lateJoinEvery
}

// requestAt is when pod p of node i (of nodes, with pods each) is
// requested, simulated time from the burst's start, for the pods of nodes
// present at the start.
func (p Profile) requestAt(i, pod, nodes int) time.Duration {
	if p.Kind != ProfileRamp {
		return 0
	}
	k := pod*nodes + i
	return time.Duration(float64(k) / p.Rate * float64(time.Second))
}

// lastArrival is when the profile's last pod is requested at the earliest,
// a floor of its own for the completion.
func (p Profile) lastArrival(nodes, pods int) time.Duration {
	switch p.Kind {
	case ProfileRamp:
		return p.requestAt(nodes-1, pods-1, nodes)
	case ProfileJoin:
		late := p.lateNodes(nodes)
		return joinAt(late-1, late)
	}
	return 0
}
