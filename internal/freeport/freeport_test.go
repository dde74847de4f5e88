package freeport

import (
	"net"
	"strconv"
	"testing"
)

// Picked ports are bindable, distinct, and below the ephemeral range.
func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	seen := map[int]bool{}
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= low {
			t.Fatalf("port %d outside %d-%d", p, lowest, low-1)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", a)
	if err != nil {
		t.Fatalf("picked %s but cannot bind it: %v", a, err)
	}
	defer l.Close()
}

// A port someone already listens on is skipped.
func TestBusyPortIsSkipped(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	busyPort := next
	mu.Unlock()
	// If another process holds the port already, it is just as busy.
	if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(busyPort))); err == nil {
		defer l.Close()
	}
	q, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if q == busyPort || q == p {
		t.Fatalf("got %d; %d is busy and %d was already handed out", q, busyPort, p)
	}
}
