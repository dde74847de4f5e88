package cluster

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer echoes every line back and counts its connections.
func echoServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return lis.Addr().String(), &accepted
}

// say writes a line and reads the echo within wait; "" if none came.
func say(t *testing.T, c net.Conn, r *bufio.Reader, line string, wait time.Duration) string {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(wait))
	got, err := r.ReadString('\n')
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return ""
		}
		t.Fatalf("read: %v", err)
	}
	return got[:len(got)-1]
}

// TestLinkProxyCut: through the proxy bytes flow; while it is cut nothing
// moves on an open connection and a new one reaches no broker; once healed
// what was held arrives, on both, and nothing was closed by the cut.
func TestLinkProxyCut(t *testing.T) {
	target, accepted := echoServer(t)
	p, addrs, err := newLinkProxy([]string{target})
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	open, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	r := bufio.NewReader(open)
	if got := say(t, open, r, "before", 10*time.Second); got != "before" {
		t.Fatalf("through the proxy: %q", got)
	}

	p.setCut(true)
	if got := say(t, open, r, "during", 300*time.Millisecond); got != "" {
		t.Fatalf("a byte crossed the cut: %q", got)
	}
	late, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	lr := bufio.NewReader(late)
	if got := say(t, late, lr, "new", 300*time.Millisecond); got != "" {
		t.Fatalf("a connection made during the cut got through: %q", got)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the broker side saw %d connections during the cut, want the 1 from before", n)
	}

	p.setCut(false)
	_ = open.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := r.ReadString('\n'); err != nil || got != "during\n" {
		t.Fatalf("held bytes after the heal: %q %v", got, err)
	}
	_ = late.SetReadDeadline(time.Now().Add(10 * time.Second))
	if got, err := lr.ReadString('\n'); err != nil || got != "new\n" {
		t.Fatalf("the connection made during the cut, after the heal: %q %v", got, err)
	}
	if got := say(t, open, r, "after", 10*time.Second); got != "after" {
		t.Fatalf("after the heal: %q", got)
	}
}
