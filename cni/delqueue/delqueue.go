// Package delqueue is the on-disk queue of CNI DELs that the plugin could
// not deliver because the agent was unreachable. The plugin writes an entry
// durably and reports success, so kubelet is never blocked by a down agent;
// the agent replays the queue when it starts and periodically after.
//
// Each entry is one JSON file named del-<unix nanos>-<random>.json. It is
// written to a temporary dot-file, fsync'ed, renamed into place and the
// directory fsync'ed, so a crash leaves either the whole entry or none.
// Names are unique, so a writer never replaces a file a reader is replaying.
package delqueue

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Version is the entry format version written by this package.
const Version = 1

const (
	prefix        = "del-"
	suffix        = ".json"
	tmpPrefix     = ".tmp-"
	corruptSuffix = ".corrupt"
)

// ErrCorrupt marks an entry file that cannot be parsed or is incomplete.
var ErrCorrupt = errors.New("corrupt del queue entry")

// Entry is one queued DEL: the attachment key and what the runtime said
// about it.
type Entry struct {
	Version      int       `json:"version"`
	Network      string    `json:"network"`
	ContainerID  string    `json:"containerID"`
	IfName       string    `json:"ifname"`
	NetNS        string    `json:"netns,omitempty"`
	CNIVersion   string    `json:"cniVersion,omitempty"`
	PodNamespace string    `json:"podNamespace,omitempty"`
	PodName      string    `json:"podName,omitempty"`
	QueuedAt     time.Time `json:"queuedAt"`
}

func (e Entry) validate() error {
	switch {
	case e.Version != Version:
		return fmt.Errorf("%w: version %d, want %d", ErrCorrupt, e.Version, Version)
	case e.Network == "" || e.ContainerID == "" || e.IfName == "":
		return fmt.Errorf("%w: attachment key incomplete (network %q, container %q, ifname %q)",
			ErrCorrupt, e.Network, e.ContainerID, e.IfName)
	case e.QueuedAt.IsZero():
		return fmt.Errorf("%w: no queue time", ErrCorrupt)
	}
	return nil
}

// Write stores e durably in dir (created 0700 if missing) and returns the
// entry's path. Version is filled in; QueuedAt must be set by the caller.
func Write(dir string, e Entry) (string, error) {
	e.Version = Version
	if err := e.validate(); err != nil {
		return "", fmt.Errorf("queue del: %w", err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return "", fmt.Errorf("queue del: encode: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("queue del: create queue dir: %w", err)
	}
	// The name needs to be unique, not secret: the runtime's generator
	// (seeded from the kernel for each process) is enough, and crypto/rand
	// would cost every exec of the plugin its initialisation.
	var rnd [8]byte
	binary.BigEndian.PutUint64(rnd[:], rand.Uint64())
	name := prefix + strconv.FormatInt(e.QueuedAt.UnixNano(), 10) + "-" + hex.EncodeToString(rnd[:]) + suffix
	final := filepath.Join(dir, name)
	tmp := filepath.Join(dir, tmpPrefix+name)
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("queue del: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("queue del: rename into place: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return "", fmt.Errorf("queue del: %w", err)
	}
	return final, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create entry: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write entry: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync entry: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close entry: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open queue dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync queue dir: %w", err)
	}
	return nil
}

// List returns the paths of the queued entries in dir, oldest first. A
// missing dir is an empty queue. Temporary files and entries moved aside as
// corrupt are not listed.
func List(dir string) ([]string, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list del queue: %w", err)
	}
	var paths []string
	for _, de := range des {
		n := de.Name()
		if de.Type().IsRegular() && strings.HasPrefix(n, prefix) && strings.HasSuffix(n, suffix) {
			paths = append(paths, filepath.Join(dir, n))
		}
	}
	// Names start with the queue time in nanoseconds; equal-length numbers
	// sort correctly as strings, which holds for any date after 2001.
	sort.Strings(paths)
	return paths, nil
}

// Read parses one entry file. A file that is truncated, not JSON, of an
// unknown version or missing its key returns an error wrapping ErrCorrupt.
func Read(path string) (Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Entry{}, fmt.Errorf("read del queue entry: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, filepath.Base(path), err)
	}
	if err := e.validate(); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return e, nil
}

// Remove deletes an applied entry durably.
func Remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove del queue entry: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

// MoveAside renames a corrupt entry to <name>.corrupt in the same dir, so it
// is kept for an operator to read but never replayed again. It returns the
// new path.
func MoveAside(path string) (string, error) {
	dst := path + corruptSuffix
	if err := os.Rename(path, dst); err != nil {
		return "", fmt.Errorf("move corrupt del queue entry aside: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return "", err
	}
	return dst, nil
}

// RemoveStaleTemps removes temporary files older than age: a writer that
// crashed before renaming never reported success, so the runtime will retry
// that DEL itself.
func RemoveStaleTemps(dir string, age time.Duration, now time.Time) error {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list del queue: %w", err)
	}
	var errs []error
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), tmpPrefix) {
			continue
		}
		fi, err := de.Info()
		if err != nil || now.Sub(fi.ModTime()) < age {
			continue
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
