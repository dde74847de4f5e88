package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// storeIDName is the key, under the cluster prefix, of the cluster's store
// ID.
const storeIDName = "store-id"

// StoreID returns the ID of this cluster's state: a random value written
// the first time any broker asks and never changed after. Every replica
// sharing the state (one etcd cluster) reads the same ID; brokers that
// each keep their own state under one cluster name (two separate etcds)
// read different IDs, which is how the split-brain guard tells them apart.
// Unlike etcd's own cluster ID, it survives a snapshot restore.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	fresh := "st-" + hex.EncodeToString(b[:])
	key := s.prefix + storeIDName
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, fresh)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", fmt.Errorf("read the cluster's store id: %w", err)
	}
	if resp.Succeeded {
		return fresh, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 || len(kvs[0].Value) == 0 {
		return "", fmt.Errorf("read the cluster's store id: %s holds no value", key)
	}
	return string(kvs[0].Value), nil
}
