package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Check runs `allotctl check` against the broker and every running agent,
// as an operator would, and returns its table. clean is true when it exits
// 0 (nothing disagrees); an error means the check could not run.
func (c *Cluster) Check(ctx context.Context) (table string, clean bool, err error) {
	var agents []string
	for _, n := range c.liveNodes() {
		agents = append(agents, n.Agent.Introspect)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cfg.Binaries.Ctl, append(append([]string{"--broker", c.Broker.Addr, "--timeout", "25s"},
		c.pki.ctlAdminArgs()...), "check", "--agents", strings.Join(agents, ","))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), true, nil
	case errors.As(err, &ee) && ee.ExitCode() == 3:
		return string(out), false, nil
	}
	return string(out), false, fmt.Errorf("allotctl check: %w: %s", err, stderr.Bytes())
}
