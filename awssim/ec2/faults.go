package ec2

import (
	"maps"
	"math/rand/v2"
	"sync"

	"github.com/allotnet/allot/awssim/simclock"
)

// Fault is a switchable misbehaviour of one action.
type Fault struct {
	// ErrorRate is the fraction (0..1) of requests answered with ErrorCode
	// instead of being carried out.
	ErrorRate float64 `json:"errorRate,omitempty"`
	// ErrorCode is the error returned; InternalError (HTTP 500) by default.
	// "Unavailable" and "RequestLimitExceeded" are answered with HTTP 503,
	// anything else with 400.
	ErrorCode string `json:"errorCode,omitempty"`
	// Latency is extra simulated time before the request is answered.
	Latency simclock.Duration `json:"latency,omitempty"`
}

// AllActions is the Faults key that applies to every action without an
// entry of its own.
const AllActions = "*"

// faults holds the current faults and the random source that draws errors.
type faults struct {
	mu  sync.Mutex
	m   map[string]Fault
	rng *rand.Rand
}

func newFaults(seed int64) *faults {
	return &faults{m: map[string]Fault{}, rng: rand.New(rand.NewPCG(uint64(seed), 0x6661756c74))}
}

// draw returns the fault for action and whether this request fails.
func (f *faults) draw(action string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := f.m[action]
	if !ok {
		ft, ok = f.m[AllActions]
	}
	if !ok {
		return Fault{}, false
	}
	return ft, ft.ErrorRate > 0 && f.rng.Float64() < ft.ErrorRate
}

func (f *faults) set(m map[string]Fault) {
	f.mu.Lock()
	f.m = maps.Clone(m)
	if f.m == nil {
		f.m = map[string]Fault{}
	}
	f.mu.Unlock()
}

func (f *faults) get() map[string]Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.m)
}
