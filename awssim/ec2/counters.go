package ec2

import (
	"sync"
	"sync/atomic"
)

// ActionCounters are one action's request counts since the last reset.
// Calls counts every request, throttled or not; Errors counts error answers
// other than throttling.
type ActionCounters struct {
	Calls     int64 `json:"calls"`
	Throttled int64 `json:"throttled"`
	Errors    int64 `json:"errors"`
}

type counter struct{ calls, throttled, errors atomic.Int64 }

// counters keeps an ActionCounters per action name.
type counters struct {
	mu sync.RWMutex
	m  map[string]*counter
}

func newCounters() *counters { return &counters{m: map[string]*counter{}} }

func (c *counters) get(action string) *counter {
	c.mu.RLock()
	x, ok := c.m[action]
	c.mu.RUnlock()
	if ok {
		return x
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if x, ok = c.m[action]; !ok {
		x = &counter{}
		c.m[action] = x
	}
	return x
}

func (c *counters) snapshot() map[string]ActionCounters {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]ActionCounters, len(c.m))
	for k, x := range c.m {
		out[k] = ActionCounters{Calls: x.calls.Load(), Throttled: x.throttled.Load(), Errors: x.errors.Load()}
	}
	return out
}

func (c *counters) reset() {
	c.mu.Lock()
	c.m = map[string]*counter{}
	c.mu.Unlock()
}
