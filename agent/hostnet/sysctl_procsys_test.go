package hostnet

import (
	"os"
	"path/filepath"
	"testing"
)

// TestProcSysElsewhere: the agent's DaemonSet mounts the host's
// /proc/sys/net away from the container's read-only /proc/sys; sysctls must
// be read and written there, and nowhere else.
func TestProcSysElsewhere(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: entering the node network namespace takes CAP_SYS_ADMIN")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "net/ipv4/ip_forward")
	if err := os.MkdirAll(filepath.Dir(key), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{ProcSys: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.setSysctls(ipForward); err != nil {
		t.Fatal(err)
	}
	if v, err := l.readSysctl("net/ipv4/ip_forward"); err != nil || v != "1" {
		t.Fatalf("ip_forward under %s = %q, %v; want 1", dir, v, err)
	}
}
