package burst

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcStats are one process's CPU time and memory, read from /proc.
type ProcStats struct {
	// CPUSeconds is user plus system CPU time since the process started.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set now; PeakRSSBytes its high-water mark
	// (VmHWM) since start or since ResetPeakRSS.
	RSSBytes     int64 `json:"rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// SelfProcStats returns this process's figures.
func SelfProcStats() ProcStats {
	var s ProcStats
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.CPUSeconds = tv(ru.Utime) + tv(ru.Stime)
	}
	s.RSSBytes, s.PeakRSSBytes, _ = memOf("self")
	return s
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// PidProcStats returns another process's figures from /proc/<pid>.
func PidProcStats(pid int) (ProcStats, error) {
	var s ProcStats
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; the rest follows ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return s, fmt.Errorf("stat of pid %d: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return s, fmt.Errorf("stat of pid %d: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("stat of pid %d: bad cpu times", pid)
	}
	s.CPUSeconds = float64(ut+st) / clockTicks
	s.RSSBytes, s.PeakRSSBytes, err = memOf(strconv.Itoa(pid))
	return s, err
}

// memOf reads VmRSS and VmHWM of /proc/<who>/status.
func memOf(who string) (rss, hwm int64, err error) {
	f, err := os.Open("/proc/" + who + "/status")
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of %s: %w", who, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		for key, dst := range map[string]*int64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				fs := strings.Fields(rest)
				if len(fs) >= 1 {
					kb, _ := strconv.ParseInt(fs[0], 10, 64)
					*dst = kb * 1024
				}
			}
		}
	}
	return rss, hwm, sc.Err()
}

// ResetPeakRSS resets this process's VmHWM to its current RSS (Linux
// clear_refs value 5), so a variant's peak is its own.
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
