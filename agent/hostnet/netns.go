package hostnet

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNetNSGone means a pod's namespace path no longer names a network
// namespace: the file is gone, or is a leftover that nothing is mounted on.
var ErrNetNSGone = errors.New("pod netns is gone")

// openNetNS opens a namespace by path and makes sure it is one: opening the
// mount point of a namespace that has been unmounted succeeds but yields a
// plain file, and entering that would fail further on with a less useful
// error.
func openNetNS(path string) (netns.NsHandle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return netns.None(), fmt.Errorf("%w: %s", ErrNetNSGone, path)
		}
		return netns.None(), fmt.Errorf("open netns %s: %w", path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(ns), &st); err != nil {
		ns.Close()
		return netns.None(), fmt.Errorf("statfs netns %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		ns.Close()
		return netns.None(), fmt.Errorf("%w: %s is not a namespace", ErrNetNSGone, path)
	}
	return ns, nil
}
