package cniwire_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allotnet/allot/agent/cniserver/cniwire"
)

// silentAgent listens on a unix socket and accepts nothing: connections
// wait in the kernel's backlog, as with a frozen agent.
func silentAgent(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "cni.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return sock
}

// TestCallBounds: an agent that never answers costs the preamble's bound
// (Unavailable, saying so) or the call's deadline when that comes first
// (DeadlineExceeded); a socket nobody serves fails at once.
func TestCallBounds(t *testing.T) {
	sock := silentAgent(t)
	req := cniwire.Request{Method: cniwire.MethodStatus}

	_, err := cniwire.Call(t.Context(), sock, 50*time.Millisecond, req)
	if cniwire.CodeOf(err) != cniwire.Unavailable || !strings.Contains(cniwire.MessageOf(err), "did not answer within") {
		t.Errorf("silent agent, no deadline: %v, want Unavailable for the preamble's bound", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = cniwire.Call(ctx, sock, time.Hour, req)
	if cniwire.CodeOf(err) != cniwire.DeadlineExceeded {
		t.Errorf("silent agent past the call's deadline: %v, want DeadlineExceeded", err)
	}

	ctx, cancel = context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := cniwire.Call(ctx, sock, time.Hour, req); cniwire.CodeOf(err) != cniwire.DeadlineExceeded {
		t.Errorf("deadline already past: %v, want DeadlineExceeded", err)
	}

	gone := filepath.Join(filepath.Dir(sock), "none.sock")
	_, err = cniwire.Call(t.Context(), gone, time.Hour, req)
	if cniwire.CodeOf(err) != cniwire.Unavailable || !strings.Contains(cniwire.MessageOf(err), "no such file") {
		t.Errorf("no socket: %v, want Unavailable naming the missing file", err)
	}
}

// TestCallReadsAnAnswerInPieces: the answer may arrive in several writes,
// after a pause; the call reads it whole.
func TestCallReadsAnAnswerInPieces(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "cni.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	served := make(chan error, 1)
	go func() {
		c, err := lis.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		pre := make([]byte, len(cniwire.Preamble))
		if _, err := io.ReadFull(c, pre); err != nil || string(pre) != cniwire.Preamble {
			served <- fmt.Errorf("preamble %q: %v", pre, err)
			return
		}
		if _, err := cniwire.ReadFrame(c); err != nil {
			served <- err
			return
		}
		out := cniwire.AppendResponse([]byte(cniwire.Preamble), cniwire.Response{Code: cniwire.OK, Body: []byte("answer")})
		for _, piece := range [][]byte{out[:3], out[3:12], out[12:]} {
			time.Sleep(5 * time.Millisecond)
			if _, err := c.Write(piece); err != nil {
				served <- err
				return
			}
		}
		served <- nil
	}()
	body, err := cniwire.Call(t.Context(), sock, time.Minute, cniwire.Request{Method: cniwire.MethodStatus})
	if err != nil || string(body) != "answer" {
		t.Errorf("answer in pieces: %q, %v; want \"answer\"", body, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
