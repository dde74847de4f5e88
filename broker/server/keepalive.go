package server

import "time"

// Keepalive of the broker's gRPC server (see serverOptions).
const (
	// KeepaliveMinTime is the shortest ping interval a client may use,
	// with or without open streams; agents ping every 30s.
	KeepaliveMinTime = 10 * time.Second
	// KeepaliveTime is how long a connection may be idle before the server
	// pings it, and KeepaliveTimeout how long it then waits for the ack
	// before closing the connection (and with it a vanished agent's
	// WatchNode stream).
	KeepaliveTime    = time.Minute
	KeepaliveTimeout = 20 * time.Second
)
