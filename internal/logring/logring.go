// Package logring keeps a process's most recent log records in memory, so
// a support bundle can carry them without reading the node's log files.
package logring

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
)

// Ring holds the last n records written to it, one JSON line each.
type Ring struct {
	mu    sync.Mutex
	lines [][]byte
	next  int
	full  bool
}

// New returns a ring of n lines (at least 1).
func New(n int) *Ring { return &Ring{lines: make([][]byte, max(n, 1))} }

var _ io.Writer = (*Ring)(nil)

// Write keeps p as one line: slog's handlers write a whole record per call.
func (r *Ring) Write(p []byte) (int, error) {
	line := bytes.Clone(p)
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	r.full = r.full || r.next == 0
	r.mu.Unlock()
	return len(p), nil
}

// Lines returns the records held, oldest first.
func (r *Ring) Lines() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out bytes.Buffer
	if r.full {
		for _, l := range r.lines[r.next:] {
			out.Write(l)
		}
	}
	for _, l := range r.lines[:r.next] {
		out.Write(l)
	}
	return out.Bytes()
}

// Tee returns a logger that writes to base's handler and keeps a JSON copy
// of every record at level or above in r.
func Tee(base *slog.Logger, r *Ring, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewMultiHandler(base.Handler(), slog.NewJSONHandler(r, &slog.HandlerOptions{Level: level})))
}
