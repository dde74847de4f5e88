package world

import (
	"encoding/json"
	"slices"
)

// tokenEntry remembers what a ClientToken created.
type tokenEntry struct {
	fingerprint string
	eniID       string
	created     NetworkInterface
}

func fingerprint(in CreateNetworkInterfaceInput) string {
	in.ClientToken = ""
	in.SecurityGroupIDs = slices.Clone(in.SecurityGroupIDs)
	slices.Sort(in.SecurityGroupIDs)
	b, _ := json.Marshal(in) // maps marshal in key order
	return string(b)
}

// replayLocked answers a CreateNetworkInterface whose ClientToken was seen:
// the same ENI for the same parameters, IdempotentParameterMismatch for
// different ones. ok is false for a new token.
func (w *World) replayLocked(in CreateNetworkInterfaceInput) (v NetworkInterface, ok bool, err error) {
	t, seen := w.tokens[in.ClientToken]
	if !seen {
		return NetworkInterface{}, false, nil
	}
	if t.fingerprint != fingerprint(in) {
		return NetworkInterface{}, true, errorf(CodeIdempotentMismatch,
			"Client token %s was already used for a request with different parameters", shorten(in.ClientToken))
	}
	if e, live := w.enis[t.eniID]; live {
		return *e.view(), true, nil
	}
	return t.created, true, nil
}

func (w *World) rememberLocked(in CreateNetworkInterfaceInput, e *eni) {
	w.tokens[in.ClientToken] = tokenEntry{fingerprint: fingerprint(in), eniID: e.id, created: *e.view()}
}
