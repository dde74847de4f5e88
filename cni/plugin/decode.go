package plugin

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/allotnet/allot/cni/cnispec"
)

// decodeNetConf decodes the netconf into conf: the object once into its
// raw members, then each member allot has a field for into that field
// (with that field's type, so a value of the wrong type is an error as it
// was decoding the whole struct). It does what json.Unmarshal into NetConf followed
// by a check of the keys did, but it never makes encoding/json build its
// field table for NetConf (reflection over the embedded PluginConf and
// its nested types), which a plugin process did from scratch on every
// exec. Keys match exactly, as the key check required before. Unknown
// keys are returned, not refused, so that parseNetConf reports the errors
// in the order it did (a missing type before a misspelled key).
func decodeNetConf(stdin []byte, conf *NetConf) (unknown []string, err error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(stdin, &raw); err != nil {
		return nil, cnispec.NewError(cnispec.ErrDecodingFailure, "cannot parse network config", err.Error())
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !knownKey(k) {
			unknown = append(unknown, strconv.Quote(k))
			continue
		}
		field := conf.field(k)
		if field == nil {
			continue
		}
		if err := json.Unmarshal(raw[k], field); err != nil {
			return nil, cnispec.NewError(cnispec.ErrDecodingFailure, "cannot parse network config",
				strconv.Quote(k)+": "+err.Error())
		}
	}
	return unknown, nil
}

// unknownKeys refuses keys in allot's section that neither allot nor the
// CNI spec defines (quoted, sorted).
func unknownKeys(unknown []string) error {
	if len(unknown) == 0 {
		return nil
	}
	return cnispec.NewError(cnispec.ErrInvalidNetworkConfig,
		"unknown key "+strings.Join(unknown, ", ")+" in allot's network config",
		`allot's keys are "agentSocket", "timeout" and "delQueueDir"; check the spelling`)
}

// field is where the netconf's member k is decoded: the NetConf (or
// embedded PluginConf) field whose JSON name is k, or nil for a key with
// no field (one the spec defines that allot does not read).
func (c *NetConf) field(k string) any {
	switch k {
	case "cniVersion":
		return &c.CNIVersion
	case "name":
		return &c.Name
	case "type":
		return &c.Type
	case "capabilities":
		return &c.Capabilities
	case "ipam":
		return &c.IPAM
	case "dns":
		return &c.DNS
	case "prevResult":
		return &c.RawPrevResult
	case "cni.dev/valid-attachments":
		return &c.ValidAttachments
	case "agentSocket":
		return &c.AgentSocket
	case "timeout":
		return &c.Timeout
	case "delQueueDir":
		return &c.DelQueueDir
	case "logFormat":
		return &c.LogFormat
	}
	return nil
}
