// Package ctxjoin gives a write made on behalf of several callers a
// context that lasts while any of them still waits for it.
package ctxjoin

import (
	"context"
	"sync/atomic"
)

// WhileAny returns a context carrying values's values that ends only once
// every one of ctxs has ended (or release is called): one caller giving up
// does not cut off the others' write. release must be called when the
// write is done; it frees what watches ctxs.
func WhileAny(values context.Context, ctxs []context.Context) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(values))
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
