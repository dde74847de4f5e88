package cniserver

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shortDir returns a temp dir short enough for unix socket paths.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "allot-t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestListenMode: the socket is created 0600 at path, nothing else is left
// in the dir, and closing removes it.
func TestListenMode(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "run", "cni.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	if des, _ := os.ReadDir(filepath.Dir(path)); len(des) != 1 {
		t.Errorf("socket dir holds %v, want only the socket", des)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the renamed socket: %v", err)
	}
	c.Close()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket left after Close: %v", err)
	}
}

// TestListenReplacesStaleSocket: a dead agent's socket file is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "cni.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close()
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
}

// TestListenRefusesNonSocket: a regular file or directory at the path is
// someone else's; it is reported and left intact.
func TestListenRefusesNonSocket(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "cni.sock")
	if err := os.WriteFile(file, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(file); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file: %v, want a not-a-socket error", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Errorf("regular file changed to %q", b)
	}
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sub); err == nil {
		t.Error("Listen over a directory succeeded")
	}
	if _, err := os.Stat(sub); err != nil {
		t.Errorf("directory removed: %v", err)
	}
	if _, err := Listen("relative.sock"); err == nil {
		t.Error("Listen on a relative path succeeded")
	}
}

// TestListenRefusesLiveSocket: a second agent must not steal the socket of
// one that is serving.
func TestListenRefusesLiveSocket(t *testing.T) {
	path := filepath.Join(shortDir(t), "cni.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second Listen: %v, want an in-use error", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("first listener lost its socket: %v", err)
	}
	c.Close()
}
