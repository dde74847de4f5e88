package store

import (
	"context"
	"fmt"

	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fence names the election key a leader won with and the revision at which
// that key was created. While the key exists with that create revision the
// leader still leads; once its lease is gone, the key is deleted and any
// other replica's key has a different create revision.
type Fence struct {
	Key string
	Rev int64
}

type fenceKey struct{}

// WithFence returns a context whose store writes commit only while key
// still exists with create revision rev (see Fence). broker/leader attaches
// it to the context of every term, so the engine and reconciler of a
// broker that lost its lease cannot write intents or releases, even in the
// moments before its keepalive notices. An empty key returns ctx unchanged.
func WithFence(ctx context.Context, key string, rev int64) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, Fence{Key: key, Rev: rev})
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// cmp is the compare a fenced transaction adds.
func (f Fence) cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(f.Key), "=", f.Rev)
}

// held reports whether a Get of the fence key (from a failed txn's Else
// branch) shows the key still held at the fence's create revision.
func (f Fence) held(r *pb.ResponseOp) bool {
	rr := r.GetResponseRange()
	return rr != nil && len(rr.Kvs) == 1 && rr.Kvs[0].CreateRevision == f.Rev
}

// notLeader wraps rpcerr.ErrNotLeader with the method and key.
func (f Fence) notLeader(method string) error {
	return fmt.Errorf("%s: election key %s (created at revision %d) is gone: %w", method, f.Key, f.Rev, rpcerr.ErrNotLeader)
}
