package logfmt

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// gateWriter blocks every Write until open is closed, and says when the
// first Write arrived.
type gateWriter struct {
	entered chan struct{}
	once    sync.Once
	open    chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func newGateWriter() *gateWriter {
	return &gateWriter{entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.Write(p)
}

func (g *gateWriter) String() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.buf.String()
}

// A logger over a writer whose reader has stopped: the loggers go on, the
// lines beyond the queue are dropped and counted, and once the reader
// reads again the kept lines come out in order, then the count.
func TestAsyncNeverBlocksAndCountsDrops(t *testing.T) {
	g := newGateWriter()
	const queue = 8
	a := Async(g, queue)
	log := slog.New(slog.NewTextHandler(a, nil))

	log.Info("line", "n", 0)
	select {
	case <-g.entered: // the writer's goroutine holds line 0, blocked
	case <-time.After(10 * time.Second):
		t.Fatal("the first line never reached the writer")
	}
	const total = 50
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for i := 1; i < total; i++ {
			log.Info("line", "n", i)
		}
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("logging waited for a writer whose reader stopped")
	}
	// Line 0 is in the writer, lines 1..queue in the queue, the rest dropped.
	if got, want := a.Dropped(), int64(total-1-queue); got != want {
		t.Fatalf("dropped %d lines, want %d", got, want)
	}

	close(g.open)
	a.Close(10 * time.Second)
	out := g.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != queue+2 {
		t.Fatalf("wrote %d lines, want %d kept and the note:\n%s", len(lines), queue+1, out)
	}
	for i := 0; i <= queue; i++ {
		if !strings.Contains(lines[i], fmt.Sprintf("n=%d", i)) {
			t.Fatalf("line %d is %q, want n=%d", i, lines[i], i)
		}
	}
	note := fmt.Sprintf("%d log lines dropped", total-1-queue)
	if !strings.Contains(lines[queue+1], note) {
		t.Fatalf("last line %q does not say %q", lines[queue+1], note)
	}
}

// Close writes what the queue holds; later lines go straight through.
func TestAsyncCloseFlushes(t *testing.T) {
	var buf syncBuffer
	a := Async(&buf, 0)
	for i := range 100 {
		fmt.Fprintf(a, "held %d\n", i)
	}
	a.Close(10 * time.Second)
	if got := strings.Count(buf.String(), "held "); got != 100 {
		t.Fatalf("after Close %d of 100 lines were written", got)
	}
	fmt.Fprintf(a, "after close\n")
	if !strings.HasSuffix(buf.String(), "after close\n") {
		t.Fatalf("a line after Close was not written: %q", buf.String())
	}
	a.Close(time.Second) // a second Close is harmless
	if a.Dropped() != 0 {
		t.Fatalf("dropped %d lines with room for all", a.Dropped())
	}
}

// Writers racing Close neither panic nor lose a line they were told was
// taken (run with -race).
func TestAsyncWritesRaceClose(t *testing.T) {
	var buf syncBuffer
	a := Async(&buf, 1<<16)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(a, "w%d %d\n", w, i)
			}
		})
	}
	time.Sleep(time.Millisecond)
	a.Close(10 * time.Second)
	wg.Wait()
	a.Close(10 * time.Second)
	if got := strings.Count(buf.String(), "\n"); got != 8*200 {
		t.Fatalf("%d of %d lines written", got, 8*200)
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
