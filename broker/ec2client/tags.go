package ec2client

import (
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Tag keys on every ENI allot creates. Leak collection trusts only ENIs that
// carry TagOwner = OwnerValue and the cluster's TagCluster.
const (
	TagCluster    = "allot.dev/cluster"
	TagInstanceID = "allot.dev/instance-id"
	TagCreatedAt  = "allot.dev/created-at" // RFC 3339, UTC
	TagOwner      = "allot.dev/owner"
	OwnerValue    = "allot-broker"
)

// Tag is one EC2 tag.
type Tag struct{ Key, Value string }

// OwnerTags returns the tags for an ENI the broker creates for an instance.
func OwnerTags(cluster, instanceID string, now time.Time) map[string]string {
	return map[string]string{
		TagCluster:    cluster,
		TagInstanceID: instanceID,
		TagCreatedAt:  now.UTC().Format(time.RFC3339),
		TagOwner:      OwnerValue,
	}
}

// sdkTags converts a tag map to SDK tags, sorted by key so requests are
// reproducible.
func sdkTags(m map[string]string) []types.Tag {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]types.Tag, 0, len(keys))
	for _, k := range keys {
		out = append(out, types.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

func tagMap(ts []types.Tag) map[string]string {
	if len(ts) == 0 {
		return nil
	}
	m := make(map[string]string, len(ts))
	for _, t := range ts {
		m[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return m
}
