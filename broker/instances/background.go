package instances

import (
	"context"
	"time"
)

// StartEnsure runs Ensure over v in a goroutine of its own, unless a pass
// is running already, and reports whether it started one; done, if set, is
// called with the pass's outcome when it ends. Wait waits for it.
//
// A pass describes through EC2's rate limiter and reads and writes node
// records in etcd, so a round that waited for it waited for both: at 5,000
// nodes joining, most of the rounds' time. Its writes reach the caller
// the way other writers' do (for the engine, through the etcd watch it
// follows), and a round plans a node once they have. v must not change
// while the pass reads it: the engine's snapshots are not changed after
// they are made.
func (m *Manager) StartEnsure(ctx context.Context, v View, now time.Time, done func(changed bool, err error)) bool {
	if !m.passing.CompareAndSwap(false, true) {
		return false
	}
	m.passes.Go(func() {
		defer m.passing.Store(false)
		changed, err := m.Ensure(ctx, v, now)
		if done != nil {
			done(changed, err)
		}
	})
	return true
}

// Wait waits for the pass StartEnsure started, if one is running.
func (m *Manager) Wait() { m.passes.Wait() }
