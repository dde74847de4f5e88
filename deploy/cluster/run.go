package cluster

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/allotnet/allot/awssim/dataplane"
	"github.com/allotnet/allot/internal/netnstest"
)

// A run's name is its stem and 6 hex digits ("allot-demo-3fa9c1"): every
// namespace it creates starts with it, and so does its directory under the
// system temporary directory, which holds the state of its processes and a
// lock file held for as long as the run lives. A crashed run leaves its
// directory with nobody holding the lock; that is how the next run of the
// same stem knows it may remove what the crashed one left.
const runIDLen = 6

// podInfix follows the run's prefix in every pod namespace name.
const podInfix = "-pod-"

// run is one cluster's claim on its name.
type run struct {
	prefix string
	dir    string
	lock   *os.File
}

// globalLock serialises the sweep and the claim of a new name between
// harnesses on the machine, so a run is never swept while it is being
// born.
func globalLock() (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "allot-cluster.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the harness lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("take the harness lock: %w", err)
	}
	return f, nil
}

// newRun removes what crashed runs of the stem left behind, then claims a
// fresh name and its directory.
func newRun(stem string, log *slog.Logger) (*run, error) {
	if err := checkStem(stem); err != nil {
		return nil, err
	}
	g, err := globalLock()
	if err != nil {
		return nil, err
	}
	defer g.Close() // closing the file drops the lock
	if _, err := sweepLocked(stem, log); err != nil {
		return nil, fmt.Errorf("remove a crashed run's leftovers: %w", err)
	}
	for range 10 {
		b := make([]byte, runIDLen/2)
		_, _ = rand.Read(b)
		prefix := stem + hex.EncodeToString(b)
		if left, err := netnstest.WithPrefix(prefix); err != nil || len(left) > 0 {
			continue
		}
		dir := filepath.Join(os.TempDir(), prefix)
		if err := os.Mkdir(dir, 0o700); err != nil {
			continue
		}
		lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err == nil {
			err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		}
		if err != nil {
			if lock != nil {
				lock.Close()
			}
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("lock run directory %s: %w", dir, err)
		}
		for _, sub := range []string{"pids", "nodes", "broker"} {
			if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
				lock.Close()
				_ = os.RemoveAll(dir)
				return nil, err
			}
		}
		return &run{prefix: prefix, dir: dir, lock: lock}, nil
	}
	return nil, errors.New("no free run name after 10 tries")
}

// release removes the run's directory and drops its lock. Call it last,
// once nothing of the run is left in the kernel.
func (r *run) release() error {
	err := os.RemoveAll(r.dir)
	r.lock.Close()
	return err
}

// pidDir is where children's pid files go.
func (r *run) pidDir() string { return filepath.Join(r.dir, "pids") }

func checkStem(stem string) error {
	if stem == "" || len(stem) > 100 || strings.ContainsAny(stem, "/ \t\n") || !strings.HasSuffix(stem, "-") {
		return fmt.Errorf("run stem %q must be a short name ending in '-' (e.g. \"allot-demo-\")", stem)
	}
	return nil
}

// SweepStale removes everything crashed runs of the stem left: their
// processes (by the pids they recorded, and only if the process is still
// one of theirs), their namespaces (the data plane's and the pods') and
// their directories. Live runs, which hold their lock, are left alone. It
// returns the prefixes it cleaned.
func SweepStale(stem string, log *slog.Logger) ([]string, error) {
	if err := checkStem(stem); err != nil {
		return nil, err
	}
	g, err := globalLock()
	if err != nil {
		return nil, err
	}
	defer g.Close()
	return sweepLocked(stem, log)
}

func sweepLocked(stem string, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cands, err := candidates(stem)
	if err != nil {
		return nil, err
	}
	var swept []string
	var errs []error
	for _, prefix := range cands {
		dir := filepath.Join(os.TempDir(), prefix)
		lock, alive := probeLock(dir)
		if alive {
			continue
		}
		err := cleanDead(prefix, dir)
		if lock != nil {
			lock.Close()
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("removed a crashed run's leftovers", "prefix", prefix)
		swept = append(swept, prefix)
	}
	return swept, errors.Join(errs...)
}

// candidates lists the run prefixes of the stem seen in namespaces or run
// directories.
func candidates(stem string) ([]string, error) {
	seen := map[string]bool{}
	add := func(name string) {
		rest, ok := strings.CutPrefix(name, stem)
		if !ok || len(rest) < runIDLen {
			return
		}
		id := rest[:runIDLen]
		if _, err := hex.DecodeString(id); err != nil || (len(rest) > runIDLen && rest[runIDLen] != '-') {
			return
		}
		seen[stem+id] = true
	}
	planes, err := dataplane.Prefixes(stem)
	if err != nil {
		return nil, err
	}
	for _, p := range planes {
		add(p)
	}
	names, err := netnstest.WithPrefix(stem)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		add(n)
	}
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", os.TempDir(), err)
	}
	for _, e := range entries {
		if e.IsDir() && len(e.Name()) == len(stem)+runIDLen {
			add(e.Name())
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// probeLock reports whether a live run holds the directory's lock. When it
// is free, the lock is returned held, so the directory stays ours while it
// is cleaned.
func probeLock(dir string) (*os.File, bool) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	if err != nil {
		return nil, false // no lock file: the run is gone (the lock is made before anything else)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, true
	}
	return f, false
}

// cleanDead ends a dead run's remaining processes, deletes its namespaces
// and removes its directory.
func cleanDead(prefix, dir string) error {
	var errs []error
	pids, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	for _, f := range pids {
		errs = append(errs, killRecorded(f, dir))
	}
	errs = append(errs, dataplane.Cleanup(prefix))
	pods, err := netnstest.WithPrefix(prefix + podInfix)
	errs = append(errs, err)
	for _, n := range pods {
		errs = append(errs, netnstest.Delete(n))
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

// killRecorded kills the process a pid file names, but only if its command
// line still mentions the run's directory: a pid reused by anything else
// is not ours to end.
func killRecorded(pidFile, dir string) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return nil
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill leftover process %d: %w", pid, err)
	}
	for range 100 {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("leftover process %d did not exit after SIGKILL", pid)
}
