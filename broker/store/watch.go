package store

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Watch returns a channel that receives the etcd revision each time
// anything under the prefix changes. Notifications coalesce: a slow reader
// gets the latest revision, not every one, and the store never blocks on
// it. Readers re-read what they care about. If the watch breaks (etcd
// compacted past it, the connection dropped) it restarts from the current
// revision and sends a notification, since something may have been missed.
// The channel closes when ctx ends.
func (s *Store) Watch(ctx context.Context) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		defer close(out)
		notify := func(rev int64) {
			select {
			case <-out: // drop the older, unread revision
			default:
			}
			out <- rev // we are the only sender and the buffer is now empty
		}
		for ctx.Err() == nil {
			wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), s.prefix, clientv3.WithPrefix())
			for resp := range wch {
				if resp.Canceled || resp.Err() != nil {
					break
				}
				if len(resp.Events) > 0 {
					notify(resp.Header.Revision)
				}
			}
			// Don't spin while etcd is unreachable.
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err == nil {
				notify(resp.Header.Revision)
			}
		}
	}()
	return out
}
