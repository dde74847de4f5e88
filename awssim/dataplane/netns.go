package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/world"
	"github.com/allotnet/allot/internal/netnstest"
)

// NetnsDir is where named network namespaces are mounted; `ip netns`
// lists the same directory (/var/run is a link to /run).
const NetnsDir = netnstest.Dir

// Suffixes of the two shared namespaces; node namespaces end in the
// instance ID instead.
const (
	suffixVPC     = "vpc"
	suffixOutside = "out"
)

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$`)

func checkPrefix(prefix string) error {
	if !prefixPattern.MatchString(prefix) {
		return fmt.Errorf("dataplane prefix %q must be 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit", prefix)
	}
	return nil
}

// owns reports whether a namespace name is one a plane with this prefix
// creates. Matching the whole shape, not just the prefix, keeps
// "allot-demo-1" from claiming "allot-demo-12-vpc" of another run.
func owns(prefix, name string) bool {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return false
	}
	return rest == suffixVPC || rest == suffixOutside || world.ValidID(world.PrefixInstance, rest)
}

// ownedNamespaces lists the mounted namespaces a plane with prefix owns.
func ownedNamespaces(prefix string) ([]string, error) {
	return netnstest.List(func(name string) bool { return owns(prefix, name) })
}

// Cleanup deletes every namespace a plane with this prefix would have
// created (a crashed run's leftovers) and nothing else. Deleting a
// namespace destroys the veth pairs inside it, so no link survives.
func Cleanup(prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	names, err := ownedNamespaces(prefix)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		errs = append(errs, netnstest.Delete(n))
	}
	return errors.Join(errs...)
}

// Prefixes lists the prefixes of every plane whose VPC namespace exists
// and whose prefix starts with stem, so a harness that names its runs
// "<stem><run id>" can find its crashed runs and Cleanup each (after making
// sure the run is really gone: a live run's namespaces look the same).
func Prefixes(stem string) ([]string, error) {
	vpcs, err := netnstest.List(func(name string) bool {
		prefix, ok := strings.CutSuffix(name, "-"+suffixVPC)
		return ok && strings.HasPrefix(prefix, stem) && checkPrefix(prefix) == nil
	})
	for i, name := range vpcs {
		vpcs[i] = strings.TrimSuffix(name, "-"+suffixVPC)
	}
	slices.Sort(vpcs)
	return vpcs, err
}

// setSysctls writes /proc/sys settings (keys with slashes) inside n, in
// one visit to the namespace.
func setSysctls(n *netnstest.NS, kv ...string) error {
	return n.Do(func() error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := os.WriteFile(filepath.Join("/proc/sys", kv[i]), []byte(kv[i+1]), 0o644); err != nil {
				return fmt.Errorf("set sysctl %s=%s in netns %s: %w", kv[i], kv[i+1], n.Name, err)
			}
		}
		return nil
	})
}

func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, unix.ENODEV)
}
