package ipamd

import (
	"context"
	"time"
)

// kubelet's back-off for a container that keeps exiting
// (pkg/kubelet/kubelet.go: initial 10 s, doubled per restart, capped at
// MaxContainerBackOff = 300 s), the "CrashLoopBackOff" a DaemonSet pod
// shows.
const (
	crashLoopInitial = 10 * time.Second
	crashLoopMax     = 5 * time.Minute
)

// CrashLoopDelay is the simulated wait before restart number n (1-based):
// 10 s, 20 s, 40 s, … capped at 5 minutes.
func CrashLoopDelay(n int) time.Duration {
	d := crashLoopInitial
	for i := 1; i < n && d < crashLoopMax; i++ {
		d *= 2
	}
	return min(d, crashLoopMax)
}

// StartSupervised is how the node's ipamd comes up on a cluster: aws-node's
// main exits when nodeInit fails (a throttled DescribeNetworkInterfaces
// included), and kubelet restarts the container after CrashLoopDelay. It
// calls Start until it succeeds or ctx ends, calling restarted with each
// failure before the back-off, and returns the number of restarts. Only
// ctx ending makes it return an error.
func (n *Node) StartSupervised(ctx context.Context, restarted func(err error)) (int, error) {
	for restarts := 0; ; restarts++ {
		err := n.Start(ctx)
		if err == nil {
			return restarts, nil
		}
		if ctx.Err() != nil {
			return restarts, ctx.Err()
		}
		if restarted != nil {
			restarted(err)
		}
		if err := n.sleep(ctx, CrashLoopDelay(restarts+1)); err != nil {
			return restarts, err
		}
	}
}
