package store

import "time"

// Liveness is the value of a node's leased alive/<instance> key. The key
// vanishes when the lease expires; the value only says since when.
type Liveness struct {
	V          int       `json:"v"`
	InstanceID string    `json:"instance_id"`
	Since      time.Time `json:"since"`
}
