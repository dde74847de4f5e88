package main

import (
	"io/fs"
	"os"
	"path"
	"strings"
)

// cgroupMemoryLimit reads the memory limit of the cgroup the process runs
// in; false when there is none.
func cgroupMemoryLimit() (int64, bool) { return cgroupLimit(os.DirFS("/")) }

// cgroupLimit finds the process's memory limit in fsys, a view of the
// root file system: the cgroup /proc/self/cgroup names, under cgroup v1's
// memory controller if it has one, else under v2's unified hierarchy; the
// smallest limit of that cgroup and its ancestors, since a parent's (the
// pod's) binds its children too. In a container with a cgroup namespace
// the process's cgroup is the mount's root, /sys/fs/cgroup itself;
// without one it is the full path below it. A file that is missing or
// unreadable, or says "max", sets no limit at its level. With no
// /proc/self/cgroup, the mount's root alone is read.
//
// allot reads these files itself rather than through a library such as
// automemlimit: it is the two files of one format and the walk up, and
// the broker needs nothing else from one.
func cgroupLimit(fsys fs.FS) (int64, bool) {
	v1, v2, ok := ownCgroup(fsys)
	switch {
	case !ok:
		for _, f := range []string{"sys/fs/cgroup/memory.max", "sys/fs/cgroup/memory/memory.limit_in_bytes"} {
			if n, ok := readLimit(fsys, f); ok {
				return n, true
			}
		}
		return 0, false
	case v1 != "":
		return smallestLimit(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
	}
	return smallestLimit(fsys, "sys/fs/cgroup", v2, "memory.max")
}

// ownCgroup reads /proc/self/cgroup: the path of the process's cgroup in
// v1's memory hierarchy (empty when memory is not a v1 controller) and in
// v2's unified one ("0::<path>").
func ownCgroup(fsys fs.FS) (v1, v2 string, ok bool) {
	b, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return "", "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2 = f[2]
		case containsField(f[1], "memory"):
			v1 = f[2]
		}
	}
	return v1, v2, v1 != "" || v2 != ""
}

func containsField(list, want string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == want {
			return true
		}
	}
	return false
}

// smallestLimit is the smallest limit in file of the cgroup at rel under
// mount and of each of its ancestors up to the mount's root.
func smallestLimit(fsys fs.FS, mount, rel, file string) (int64, bool) {
	dir := path.Join(mount, path.Clean("/" + rel)[1:])
	var least int64
	for {
		if n, ok := readLimit(fsys, path.Join(dir, file)); ok && (least == 0 || n < least) {
			least = n
		}
		if dir == mount || !strings.HasPrefix(dir, mount+"/") {
			return least, least > 0
		}
		dir = path.Dir(dir)
	}
}

func readLimit(fsys fs.FS, name string) (int64, bool) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0, false
	}
	return parseCgroupLimit(string(b))
}
