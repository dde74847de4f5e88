package allotv1

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// The CNI service's requests come from the plugin on the node's own socket,
// but the key they carry is what every agent record, host veth name and
// alias is derived from, so it is checked here, once, by the CNI spec's
// rules (the ones libcni and the plugin's skel already apply to what the
// runtime sends). The agent's CNI server runs these checks on every request
// and on every DEL it replays from the plugin's queue; nothing behind it
// validates the key again.

// cniNameRe is what CNI allows in a network name and a container ID.
var cniNameRe = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`)

// maxIfNameLen is the kernel's limit on interface names (IFNAMSIZ - 1).
const maxIfNameLen = 15

func checkCNIName(field, v, source string) error {
	if v == "" {
		return fieldErr(field, "required (%s)", source)
	}
	if !cniNameRe.MatchString(v) {
		return fieldErr(field, "%s may hold only letters, digits, '_', '.' and '-', starting with a letter or digit", quote(v))
	}
	return nil
}

func checkIfName(field, v string) error {
	switch {
	case v == "":
		return fieldErr(field, "required (CNI_IFNAME)")
	case len(v) > maxIfNameLen:
		return fieldErr(field, "%s is longer than %d bytes", quote(v), maxIfNameLen)
	case v == "." || v == "..":
		return fieldErr(field, "%s is not an interface name", quote(v))
	case strings.ContainsFunc(v, func(r rune) bool { return r == '/' || r == ':' || unicode.IsSpace(r) }):
		return fieldErr(field, "%s holds '/', ':' or white space", quote(v))
	}
	return nil
}

// Validate checks a CNI attachment key: all three parts, each as CNI
// constrains it.
func (x *Attachment) Validate() error {
	if x == nil {
		return errors.New("attachment: required")
	}
	if err := checkCNIName("attachment.network", x.GetNetwork(), "the network name from the CNI config"); err != nil {
		return err
	}
	return x.checkContainerAndIf()
}

func (x *Attachment) checkContainerAndIf() error {
	if err := checkCNIName("attachment.container_id", x.GetContainerId(), "CNI_CONTAINERID"); err != nil {
		return err
	}
	return checkIfName("attachment.ifname", x.GetIfname())
}

// Validate checks a CNI ADD/DEL/CHECK request. The netns may be empty: a DEL
// can arrive after the sandbox is gone and must still succeed.
func (x *CNIRequest) Validate() error {
	return x.GetAttachment().Validate()
}

// Validate checks a CNI GC request. A valid attachment may leave its
// network out (it is the request's); if it names one, it must be the
// request's.
func (x *CNIGCRequest) Validate() error {
	if err := checkCNIName("network", x.GetNetwork(), "the network name from the CNI config"); err != nil {
		return err
	}
	for i, a := range x.GetValid() {
		var err error
		switch {
		case a == nil:
			err = errors.New("attachment: required")
		case a.GetNetwork() != "" && a.GetNetwork() != x.GetNetwork():
			err = fieldErr("attachment.network", "%s is not the request's network %s", quote(a.GetNetwork()), quote(x.GetNetwork()))
		default:
			err = a.checkContainerAndIf()
		}
		if err != nil {
			return fmt.Errorf("valid[%d].%w", i, err)
		}
	}
	return nil
}

// Validate accepts every CNI STATUS request; it has no fields.
func (x *CNIStatusRequest) Validate() error { return nil }
