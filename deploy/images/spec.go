package main

import "path"

// file is one file an image carries: src is a path on the build machine,
// dst its absolute path in the image.
type file struct {
	src, dst string
	mode     int64
}

// spec is one image: what goes in and how it starts.
type spec struct {
	name       string // repository name under the registry, e.g. allot-agent
	entrypoint []string
	user       string // uid:gid; numeric, the images have no /etc/passwd
	files      []file
}

// binDir is where binaries live in every image.
const binDir = "/usr/local/bin"

// Users. The agent programs the node's network through netlink and setns:
// it runs as root with only the capabilities its DaemonSet grants. The
// broker needs nothing of the node and runs as an unprivileged user.
const (
	rootUser    = "0:0"
	nonRootUser = "65532:65532"
)

// specs are the images `make images` builds, from binaries in bins and the
// conflist at conflist.
func specs(bins, conflist string) []spec {
	bin := func(name string) file {
		return file{src: path.Join(bins, name), dst: path.Join(binDir, name), mode: 0o755}
	}
	return []spec{
		{
			name:       "allot-agent",
			entrypoint: []string{path.Join(binDir, "allot-agent")},
			user:       rootUser,
			// The plugin and its installer ride along for the DaemonSet's
			// init container; the conflist is the default it installs.
			files: []file{
				bin("allot-agent"), bin("allot"), bin("allot-install-cni"),
				{src: conflist, dst: "/etc/allot/cni/10-allot.conflist", mode: 0o644},
			},
		},
		{
			name:       "allot-broker",
			entrypoint: []string{path.Join(binDir, "allot-broker")},
			user:       nonRootUser,
			// allotctl, so an operator can `kubectl exec` into a broker.
			files: []file{bin("allot-broker"), bin("allotctl")},
		},
	}
}

// binaries lists every binary the specs need, for the Makefile and tests.
func binaries() []string {
	return []string{"allot-agent", "allot", "allot-install-cni", "allot-broker", "allotctl"}
}
