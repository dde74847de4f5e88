package brokerlink

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// Client keepalive towards the broker. Without it a broker that vanished
// behind a partition (no RST, no FIN) leaves the watch stream waiting for
// the next snapshot until the kernel gives up on the TCP connection, which
// can take many minutes; with it the stream fails after KeepaliveTime +
// KeepaliveTimeout and the link reconnects, perhaps to another replica. The
// broker's enforcement policy (broker/server) allows pings this often.
const (
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
)

// DialOptions are the options every agent connection to the broker should
// be made with (besides transport credentials and resolvers): the client
// keepalive above, pinging even between streams so a dead connection is
// found before the next session needs it.
func DialOptions() []grpc.DialOption {
	return dialOptions(KeepaliveTime, KeepaliveTimeout)
}

func dialOptions(every, timeout time.Duration) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithKeepaliveParams(keepalive.ClientParameters{
		Time: every, Timeout: timeout, PermitWithoutStream: true,
	})}
}
