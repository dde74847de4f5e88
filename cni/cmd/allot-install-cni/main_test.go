package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func setup(t *testing.T, conflist string) options {
	t.Helper()
	src, dst := t.TempDir(), t.TempDir()
	o := options{
		plugin: filepath.Join(src, "allot"), conflist: filepath.Join(src, "10-allot.conflist"),
		binDir: filepath.Join(dst, "bin"), confDir: filepath.Join(dst, "net.d"),
	}
	for _, d := range []string{o.binDir, o.confDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(o.plugin, []byte("#!plugin v2"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.conflist, []byte(conflist), 0o600); err != nil {
		t.Fatal(err)
	}
	return o
}

func TestInstallReplacesBothFiles(t *testing.T) {
	o := setup(t, `{"cniVersion":"1.1.0","name":"allot","plugins":[{"type":"allot"}]}`)
	// An older plugin is already there, as after an upgrade.
	if err := os.WriteFile(filepath.Join(o.binDir, "allot"), []byte("#!plugin v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := install(o); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(o.binDir, "allot"))
	if err != nil || string(got) != "#!plugin v2" {
		t.Fatalf("plugin = %q, %v", got, err)
	}
	if fi, _ := os.Stat(filepath.Join(o.binDir, "allot")); fi.Mode().Perm() != 0o755 {
		t.Errorf("plugin mode %v, want 0755", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(o.confDir, "10-allot.conflist")); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(o.binDir)
	if len(left) != 1 {
		t.Errorf("bin dir holds %d entries, want only the plugin (no temp files)", len(left))
	}
}

func TestBadConflistInstallsNothing(t *testing.T) {
	o := setup(t, `{"name":"allot"`)
	err := install(o)
	if err == nil || !strings.Contains(err.Error(), "conflist") {
		t.Fatalf("install = %v, want a conflist error", err)
	}
	for _, d := range []string{o.binDir, o.confDir} {
		if ents, _ := os.ReadDir(d); len(ents) != 0 {
			t.Errorf("%s holds %d entries after a refused install", d, len(ents))
		}
	}
}
