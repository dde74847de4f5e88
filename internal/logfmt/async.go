package logfmt

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultAsyncLines is how many log lines an Async writer holds for its
// reader before it drops them.
const DefaultAsyncLines = 4096

// AsyncWriter passes log lines to an io.Writer from a goroutine of its
// own, so that a logging caller never waits for the writer's reader.
//
// A daemon's log goes to a pipe: the container runtime's, or a benchmark
// harness's. When that reader falls behind, a synchronous write blocks
// the logging goroutine inside slog's handler, which holds the handler's
// lock while it writes, and every other goroutine that logs queues behind
// it: a broker under load had 11,000 goroutines (the agents' calls, the
// embedded etcd's request handlers) waiting on that one lock while the
// line at its head waited for the pipe. With AsyncWriter a line is copied
// into a queue of bounded length; when the queue is full the line is
// dropped and counted, and the writer says how many it dropped once its
// reader catches up. Losing log lines under overload is the trade: the
// work the lines describe goes on.
type AsyncWriter struct {
	w       io.Writer
	lines   chan []byte
	dropped atomic.Int64
	done    chan struct{}
	// mu orders Write's sends against Close's close of lines: writers
	// share it, Close takes it alone.
	mu     sync.RWMutex
	closed bool
}

// Async returns an AsyncWriter writing to w, holding at most lines lines
// (DefaultAsyncLines if lines <= 0). Close it before the process exits so
// that the lines it holds are written.
func Async(w io.Writer, lines int) *AsyncWriter {
	if lines <= 0 {
		lines = DefaultAsyncLines
	}
	a := &AsyncWriter{w: w, lines: make(chan []byte, lines), done: make(chan struct{})}
	go a.run()
	return a
}

// Write queues a copy of p (slog's handlers write one whole record per
// call) or, if the queue is full, drops it. It never blocks and never
// fails: a log line is not worth stopping the caller for. After Close,
// lines are written directly.
func (a *AsyncWriter) Write(p []byte) (n int, err error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.closed {
		return a.w.Write(p)
	}
	select {
	case a.lines <- append([]byte(nil), p...):
	default:
		a.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped is how many lines were dropped because the queue was full.
func (a *AsyncWriter) Dropped() int64 { return a.dropped.Load() }

func (a *AsyncWriter) run() {
	defer close(a.done)
	var told int64
	for line := range a.lines {
		_, _ = a.w.Write(line)
		// Said once the queue has drained, so that the note follows the
		// lines written before the drops rather than the queue's head.
		if d := a.dropped.Load(); d > told && len(a.lines) == 0 {
			fmt.Fprintf(a.w, "logfmt: %d log lines dropped: the log's reader fell behind (%d in all)\n", d-told, d)
			told = d
		}
	}
}

// Close stops taking lines into the queue, writes the ones it holds,
// waiting at most wait for them, and returns. Later writes go straight to
// the underlying writer.
func (a *AsyncWriter) Close(wait time.Duration) {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.lines)
	}
	a.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	}
}
