package store

import (
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
	"strings"
)

// Key kinds under the cluster prefix. docs/etcd.md is the reference.
const (
	kindSubnets  = "subnets"
	kindNodes    = "nodes"
	kindDemand   = "demand"
	kindUsage    = "usage"
	kindAlive    = "alive"
	kindENIs     = "enis"
	kindIntents  = "intents"
	kindReleases = "releases"
	// electionName is where broker/leader runs concurrency.Election.
	electionName = "election"
)

// key returns the etcd key of one record.
func (s *Store) key(kind, id string) string { return s.prefix + kind + "/" + id }

// dir returns the prefix holding every record of a kind, ending in "/".
func (s *Store) dir(kind string) string { return s.prefix + kind + "/" }

// ElectionPrefix is the prefix broker/leader passes to
// concurrency.NewElection: "/allot/v1/<cluster>/election" without a trailing
// slash, because the election appends "/<lease id>" itself.
func (s *Store) ElectionPrefix() string { return ElectionPrefixOf(s.prefix) }

// ElectionPrefixOf is ElectionPrefix for a store prefix
// ("/allot/v1/<cluster>/", as Prefix returns it), for callers that hold
// only the prefix (broker/leader's Config).
func ElectionPrefixOf(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + electionName
}

// checkID rejects ids that would break the key layout.
func checkID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s: empty id: %w", what, rpcerr.ErrInvalid)
	}
	if strings.ContainsAny(id, "/ \t\n\x00") || len(id) > 256 {
		return fmt.Errorf("%s %q: id must be at most 256 characters without '/' or spaces: %w", what, id, rpcerr.ErrInvalid)
	}
	return nil
}
