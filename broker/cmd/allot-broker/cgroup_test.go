package main

import (
	"testing"
	"testing/fstest"
)

// TestCgroupLimit: the memory limit is found where a container runtime
// puts it (cgroup v2 with and without a cgroup namespace, v1), the
// smallest of the process's cgroup and its ancestors wins, and a missing,
// unlimited or unreadable file sets none.
func TestCgroupLimit(t *testing.T) {
	const (
		mib256 = "268435456\n"
		gib1   = "1073741824\n"
		v1Max  = "9223372036854771712\n"
	)
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  int64
	}{
		{"v2 with a cgroup namespace", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("536870912\n"),
		}, 512 << 20},
		{"v2 without a namespace: the pod's limit binds a container without one", fstest.MapFS{
			"proc/self/cgroup": file("0::/kubepods.slice/pod1/ctr\n"),
			"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.max": file("max\n"),
			"sys/fs/cgroup/kubepods.slice/pod1/memory.max":     file(gib1),
			"sys/fs/cgroup/kubepods.slice/memory.max":          file("max\n"),
		}, 1 << 30},
		{"v2: the container's own limit is the smaller", fstest.MapFS{
			"proc/self/cgroup": file("0::/kubepods.slice/pod1/ctr\n"),
			"sys/fs/cgroup/kubepods.slice/pod1/ctr/memory.max": file(mib256),
			"sys/fs/cgroup/kubepods.slice/pod1/memory.max":     file(gib1),
		}, 256 << 20},
		{"v2 path outside the mount (the mount is the container's own)", fstest.MapFS{
			"proc/self/cgroup":         file("0::/system.slice/docker-abc.scope\n"),
			"sys/fs/cgroup/memory.max": file(mib256),
		}, 256 << 20},
		{"v1 memory controller, beside v2's empty hierarchy", fstest.MapFS{
			"proc/self/cgroup": file("12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file(mib256),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            file(v1Max),
			"sys/fs/cgroup/memory.max":                              file(gib1),
		}, 256 << 20},
		{"v1 unlimited", fstest.MapFS{
			"proc/self/cgroup": file("4:memory:/process/x\n"),
			"sys/fs/cgroup/memory/process/x/memory.limit_in_bytes": file(v1Max),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":           file(v1Max),
		}, 0},
		{"unreadable limit", fstest.MapFS{
			"proc/self/cgroup":         file("0::/\n"),
			"sys/fs/cgroup/memory.max": file("lots\n"),
		}, 0},
		{"a path that climbs out of the mount", fstest.MapFS{
			"proc/self/cgroup":         file("0::/../../etc\n"),
			"sys/fs/cgroup/memory.max": file(mib256),
		}, 256 << 20},
		{"no /proc/self/cgroup: the mount's root", fstest.MapFS{
			"sys/fs/cgroup/memory.max": file(gib1),
		}, 1 << 30},
		{"garbage in /proc/self/cgroup", fstest.MapFS{
			"proc/self/cgroup":         file("nonsense\n"),
			"sys/fs/cgroup/memory.max": file(gib1),
		}, 1 << 30},
		{"nothing at all", fstest.MapFS{}, 0},
	} {
		got, ok := cgroupLimit(tc.files)
		if got != tc.want || ok != (tc.want > 0) {
			t.Errorf("%s: limit %d, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
}
