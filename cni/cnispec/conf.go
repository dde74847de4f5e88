package cnispec

// PluginConf is what the spec defines of every plugin's network config
// (the library's types.PluginConf, less the parsed prevResult).
type PluginConf struct {
	CNIVersion       string          `json:"cniVersion,omitempty"`
	Name             string          `json:"name,omitempty"`
	Type             string          `json:"type,omitempty"`
	Capabilities     map[string]bool `json:"capabilities,omitempty"`
	IPAM             IPAM            `json:"ipam,omitempty"`
	DNS              DNS             `json:"dns,omitempty"`
	RawPrevResult    map[string]any  `json:"prevResult,omitempty"`
	ValidAttachments []GCAttachment  `json:"cni.dev/valid-attachments,omitempty"`
}

// IPAM names a config's IPAM plugin.
type IPAM struct {
	Type string `json:"type,omitempty"`
}

// GCAttachment is an attachment GC must keep.
type GCAttachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}
