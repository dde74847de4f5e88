package store

import (
	"encoding/json"
	"fmt"
	"github.com/allotnet/allot/proto/allot/v1/rpcerr"
)

// record is implemented by every value type kept in etcd.
type record interface {
	schema() int
	setSchema()
	recordID() string
	setRev(int64)
}

func (r *Subnet) schema() int        { return r.V }
func (r *Subnet) setSchema()         { r.V = SchemaVersion }
func (r *Subnet) recordID() string   { return r.ID }
func (r *Subnet) setRev(rev int64)   { r.Rev = rev }
func (r *Node) schema() int          { return r.V }
func (r *Node) setSchema()           { r.V = SchemaVersion }
func (r *Node) recordID() string     { return r.InstanceID }
func (r *Node) setRev(rev int64)     { r.Rev = rev }
func (r *Demand) schema() int        { return r.V }
func (r *Demand) setSchema()         { r.V = SchemaVersion }
func (r *Demand) recordID() string   { return r.InstanceID }
func (r *Demand) setRev(rev int64)   { r.Rev = rev }
func (r *Usage) schema() int         { return r.V }
func (r *Usage) setSchema()          { r.V = SchemaVersion }
func (r *Usage) recordID() string    { return r.InstanceID }
func (r *Usage) setRev(rev int64)    { r.Rev = rev }
func (r *Liveness) schema() int      { return r.V }
func (r *Liveness) setSchema()       { r.V = SchemaVersion }
func (r *Liveness) recordID() string { return r.InstanceID }
func (r *Liveness) setRev(int64)     {}
func (r *ENI) schema() int           { return r.V }
func (r *ENI) setSchema()            { r.V = SchemaVersion }
func (r *ENI) recordID() string      { return r.ID }
func (r *ENI) setRev(rev int64)      { r.Rev = rev }
func (r *Intent) schema() int        { return r.V }
func (r *Intent) setSchema()         { r.V = SchemaVersion }
func (r *Intent) recordID() string   { return r.ID }
func (r *Intent) setRev(rev int64)   { r.Rev = rev }
func (r *Release) schema() int       { return r.V }
func (r *Release) setSchema()        { r.V = SchemaVersion }
func (r *Release) recordID() string  { return r.ID }
func (r *Release) setRev(rev int64)  { r.Rev = rev }

// decode parses one stored value into dst. Anything that does not decode,
// carries another schema version, or names a different id than its key is
// rpcerr.ErrCorrupt naming the key: a broker must never act on a guess.
func decode[P interface {
	*T
	record
}, T any](key string, value []byte, modRev int64, wantID string, dst P) error {
	if err := json.Unmarshal(value, dst); err != nil {
		return fmt.Errorf("%w: key %s: %v", rpcerr.ErrCorrupt, key, err)
	}
	if v := dst.schema(); v != SchemaVersion {
		return fmt.Errorf("%w: key %s: schema version %d, this broker reads %d", rpcerr.ErrCorrupt, key, v, SchemaVersion)
	}
	if got := dst.recordID(); got != wantID {
		return fmt.Errorf("%w: key %s: record names id %q", rpcerr.ErrCorrupt, key, got)
	}
	if r, ok := any(dst).(internIDs); ok {
		r.internIDs()
	}
	dst.setRev(modRev)
	return nil
}

// encode stamps the schema version and marshals r. The only thing that can
// fail is a time outside what JSON can carry (years past 9999), which came
// from a caller: rpcerr.ErrInvalid.
func encode(key string, r record) (string, error) {
	r.setSchema()
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode %s: %v: %w", key, err, rpcerr.ErrInvalid)
	}
	return string(b), nil
}
