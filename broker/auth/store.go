package auth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Store keeps what every broker replica must agree on: the secret that
// signs tokens and challenges, and each instance's node key binding.
type Store interface {
	// Secret returns the cluster's secret, creating it on first use.
	Secret(ctx context.Context) ([]byte, error)
	// Bind applies decideBinding atomically and returns the binding in
	// force afterwards.
	Bind(ctx context.Context, cand Binding) (Binding, error)
	// Forget removes an instance's binding, so the next attestation binds
	// afresh (an operator's repair after a node lost its key).
	Forget(ctx context.Context, instanceID string) error
}

// EtcdStore is the Store in etcd, beside the broker's records:
//
//	<prefix>auth/secret            32 random bytes
//	<prefix>auth/bindings/<id>     Binding (JSON, "v": 1)
type EtcdStore struct {
	cli    *clientv3.Client
	prefix string
}

var _ Store = (*EtcdStore)(nil)

// The keys EtcdStore writes: keyDir under the broker store's prefix, the
// others under keyDir. docs/etcd.md lists them (a test in broker/store
// checks every key constant named key… here is there).
const (
	keyDir      = "auth/"
	keySecret   = "secret"
	keyBindings = "bindings/"
)

// NewEtcdStore uses cli under prefix (the broker store's, ending in "/").
func NewEtcdStore(cli *clientv3.Client, prefix string) *EtcdStore {
	return &EtcdStore{cli: cli, prefix: prefix + keyDir}
}

const secretSize = 32

// Secret implements Store. Replicas racing to create it agree on the one
// whose transaction won.
func (s *EtcdStore) Secret(ctx context.Context) ([]byte, error) {
	key := s.prefix + keySecret
	fresh := make([]byte, secretSize)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(fresh))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, fmt.Errorf("auth secret: %w", err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 || len(kvs[0].Value) < secretSize {
		return nil, fmt.Errorf("auth secret %s: missing or shorter than %d bytes", key, secretSize)
	}
	return kvs[0].Value, nil
}

// Bind implements Store with a compare on the binding's revision, retried
// when another replica wrote in between.
func (s *EtcdStore) Bind(ctx context.Context, cand Binding) (Binding, error) {
	key := s.prefix + keyBindings + cand.InstanceID
	cand.V = 1
	for range 5 {
		resp, err := s.cli.Get(ctx, key)
		if err != nil {
			return Binding{}, fmt.Errorf("read node key binding: %w", err)
		}
		var cur *Binding
		rev := int64(0)
		if len(resp.Kvs) == 1 {
			var b Binding
			if err := json.Unmarshal(resp.Kvs[0].Value, &b); err != nil || b.V != 1 || b.InstanceID != cand.InstanceID {
				return Binding{}, fmt.Errorf("node key binding %s is corrupt; delete it to let the node attest again", key)
			}
			cur, rev = &b, resp.Kvs[0].ModRevision
		}
		out, write := decideBinding(cur, cand)
		if !write {
			return out, nil
		}
		val, err := json.Marshal(out)
		if err != nil {
			return Binding{}, err
		}
		tx, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return Binding{}, fmt.Errorf("write node key binding: %w", err)
		}
		if tx.Succeeded {
			return out, nil
		}
	}
	return Binding{}, errors.New("node key binding: changed concurrently too often; retry")
}

// Forget implements Store.
func (s *EtcdStore) Forget(ctx context.Context, instanceID string) error {
	if _, err := s.cli.Delete(ctx, s.prefix+keyBindings+instanceID); err != nil {
		return fmt.Errorf("forget node key binding: %w", err)
	}
	return nil
}
