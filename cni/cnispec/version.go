package cnispec

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Current is the newest spec version, the cniVersion of VERSION's answer.
const Current = "1.1.0"

// Versions are the spec versions a plugin speaks, in ascending order.
type Versions []string

// Encode writes the answer to VERSION.
func (v Versions) Encode(w io.Writer) error {
	return json.NewEncoder(w).Encode(struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions,omitempty"`
	}{Current, v})
}

// check refuses a config version the plugin does not speak.
func (v Versions) check(config string) *Error {
	if slices.Contains(v, config) {
		return nil
	}
	return NewError(ErrIncompatibleCNIVersion, "incompatible CNI versions",
		fmt.Sprintf("config is %q, plugin supports %q", config, []string(v)))
}

// decodeVersion is the config's cniVersion; an absent one is 0.1.0.
func decodeVersion(stdin []byte) (string, error) {
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return "", fmt.Errorf("decoding version from network config: %w", err)
	}
	if conf.CNIVersion == "" {
		return "0.1.0", nil
	}
	return conf.CNIVersion, nil
}

// parseVersion splits a spec version into its numbers; "" is 0.1.0.
func parseVersion(version string) (major, minor, micro int, err error) {
	if version == "" {
		return 0, 1, 0, nil
	}
	parts := strings.Split(version, ".")
	if len(parts) >= 4 {
		return -1, -1, -1, fmt.Errorf("invalid version %q: too many parts", version)
	}
	names := []string{"major", "minor", "micro"}
	nums := []*int{&major, &minor, &micro}
	for i, p := range parts {
		if *nums[i], err = strconv.Atoi(p); err != nil {
			return -1, -1, -1, fmt.Errorf("failed to convert %s version part %q: %w", names[i], p, err)
		}
	}
	return major, minor, micro, nil
}

// atLeast reports whether version is other or later.
func atLeast(version, other string) (bool, error) {
	a1, a2, a3, err := parseVersion(version)
	if err != nil {
		return false, err
	}
	b1, b2, b3, err := parseVersion(other)
	if err != nil {
		return false, err
	}
	return a1 > b1 || a1 == b1 && (a2 > b2 || a2 == b2 && a3 >= b3), nil
}
