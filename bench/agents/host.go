package agents

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// mountOf names the filesystem holding path as "<source> <type> <mount
// point>", from /proc/self/mounts (the longest mount point above it).
func mountOf(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "unknown"
	}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	best, bestLen := "unknown", -1
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mp := fs[1]
		if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) > bestLen {
			best, bestLen = fs[0]+" "+fs[2]+" "+mp, len(mp)
		}
	}
	return best
}

// loadAverage is the 1-minute load average, or -1.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(fs[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// rssSplit reads how much of a process's resident set is anonymous (heap,
// stacks) and how much is file pages (its binary), in MiB, and how many
// threads it has.
func rssSplit(pid int) (anon, file float64, threads int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		fs := strings.Fields(l)
		if len(fs) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(fs[1], 64)
		if err != nil {
			continue
		}
		switch fs[0] {
		case "RssAnon:":
			anon = kb / 1024
		case "RssFile:":
			file = kb / 1024
		case "Threads:":
			threads = int(kb)
		}
	}
	return anon, file, threads
}
