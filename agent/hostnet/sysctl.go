package hostnet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// sysctl is one /proc/sys/net setting, keyed by its path under /proc/sys
// (slashes, so device names with dots stay intact).
type sysctl struct {
	key   string
	value string
}

func rpFilterLoose(dev string) sysctl {
	// 2 = loose: the source only has to be routable somewhere. Replies to
	// pods on a secondary ENI arrive on that ENI while the route back to
	// their source leaves by the primary one; strict mode would drop them.
	return sysctl{key: "net/ipv4/conf/" + dev + "/rp_filter", value: "2"}
}

var ipForward = sysctl{key: "net/ipv4/ip_forward", value: "1"}

// setSysctls writes settings inside the node namespace, skipping those
// already right. /proc/sys/net shows the namespace of the thread that opens
// it, hence the namespace switch even for a single write.
func (l *Linux) setSysctls(settings ...sysctl) error {
	return inNetNS(l.nodeNS, func() error {
		for _, s := range settings {
			path := filepath.Join(l.procSys, s.key)
			cur, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("read sysctl %s: %w", s.key, err)
			}
			if string(bytes.TrimSpace(cur)) == s.value {
				continue
			}
			if err := os.WriteFile(path, []byte(s.value), 0o644); err != nil {
				return fmt.Errorf("set sysctl %s=%s: %w", s.key, s.value, err)
			}
		}
		return nil
	})
}

// readSysctl reads one setting inside the node namespace.
func (l *Linux) readSysctl(key string) (string, error) {
	var v string
	err := inNetNS(l.nodeNS, func() error {
		b, err := os.ReadFile(filepath.Join(l.procSys, key))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", key, err)
		}
		v = string(bytes.TrimSpace(b))
		return nil
	})
	return v, err
}
