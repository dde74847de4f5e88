// Package freeport picks loopback TCP ports for servers that must be told
// their address before they bind it: a child process given --listen, or an
// embedded etcd member whose URL is written into its peers' configuration.
//
// Asking the kernel for port 0 and closing the listener is not enough. That
// port comes from the ephemeral range, the same range the kernel draws from
// for every outgoing connection's source port, so on a busy machine (tests
// running in parallel, each dialling etcd and gRPC) another socket can take
// it in the moment between the pick and the child's bind. Ports here are
// picked below the ephemeral range, where the kernel never hands out source
// ports on its own, and each process starts at its own random offset and
// walks forward, so two processes picking at once rarely try the same port.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the first port ever picked: well above the ports well-known
// services use.
const lowest = 10000

// defaultEphemeralLow is Linux's default first ephemeral port, used when
// /proc cannot be read.
const defaultEphemeralLow = 32768

var (
	mu   sync.Mutex
	next int // next port to try; 0 until first use
	high int // first port not to use (the ephemeral range's low bound)
)

// Addr returns "127.0.0.1:PORT" for a port nothing listens on right now
// and outside the kernel's ephemeral range.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// Port returns a loopback port as Addr does.
func Port() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	if next == 0 {
		high = ephemeralLow()
		if high <= lowest+100 {
			high = defaultEphemeralLow
		}
		next = lowest + rand.IntN(high-lowest)
	}
	for range high - lowest {
		p := next
		next++
		if next >= high {
			next = lowest
		}
		if free(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", lowest, high-1)
}

// free reports whether p can be bound on loopback now.
func free(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// ephemeralLow reads the low bound of net.ipv4.ip_local_port_range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return defaultEphemeralLow
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return defaultEphemeralLow
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return defaultEphemeralLow
	}
	return n
}
