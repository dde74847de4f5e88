package world

import (
	"fmt"
	"regexp"
	"strings"
)

// ID prefixes of the resources the world holds.
const (
	PrefixENI        = "eni"
	PrefixInstance   = "i"
	PrefixSubnet     = "subnet"
	PrefixVPC        = "vpc"
	PrefixAttachment = "eni-attach"
	PrefixSG         = "sg"
)

var idPattern = regexp.MustCompile(`^([a-z]+(?:-attach)?)-([0-9a-f]{8}|[0-9a-f]{17})$`)

// ValidID reports whether id is a well-formed EC2 ID with the given prefix:
// the prefix, a dash and 8 or 17 lowercase hex digits.
func ValidID(prefix, id string) bool {
	m := idPattern.FindStringSubmatch(id)
	return m != nil && m[1] == prefix
}

// CheckID returns the Malformed error EC2 gives for an ill-formed ID.
func CheckID(prefix, id string) error {
	if ValidID(prefix, id) {
		return nil
	}
	code := map[string]string{
		PrefixENI:        CodeENIMalformed,
		PrefixInstance:   CodeInstanceMalformed,
		PrefixSubnet:     CodeSubnetMalformed,
		PrefixAttachment: CodeAttachmentMalformed,
	}[prefix]
	if code == "" {
		code = CodeInvalidID
	}
	return errorf(code, "Invalid id: %q (expecting %q)", shorten(id), prefix+"-...")
}

// ResourcePrefix returns the prefix of a well-formed ID, or "".
func ResourcePrefix(id string) string {
	m := idPattern.FindStringSubmatch(id)
	if m == nil {
		return ""
	}
	return m[1]
}

func shorten(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// newIDLocked returns a fresh ID with the prefix; w.mu must be held.
func (w *World) newIDLocked(prefix string) string {
	for {
		id := fmt.Sprintf("%s-%x%016x", prefix, w.rng.IntN(16), w.rng.Uint64())
		if !w.ids[id] {
			w.ids[id] = true
			return id
		}
	}
}

// newMACLocked returns a fresh locally administered unicast MAC.
func (w *World) newMACLocked() string {
	for {
		v := w.rng.Uint64()
		mac := fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", byte(v>>32), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
		if !w.ids[mac] {
			w.ids[mac] = true
			return mac
		}
	}
}
