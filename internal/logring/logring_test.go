package logring

import (
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestRingKeepsTheLastRecords(t *testing.T) {
	r := New(3)
	log := Tee(slog.New(slog.NewTextHandler(io.Discard, nil)), r, slog.LevelInfo)
	log.Debug("hidden")
	for _, m := range []string{"one", "two", "three", "four"} {
		log.Info(m, "k", "v")
	}
	got := strings.Split(strings.TrimSpace(string(r.Lines())), "\n")
	if len(got) != 3 || !strings.Contains(got[0], `"msg":"two"`) || !strings.Contains(got[2], `"msg":"four"`) {
		t.Fatalf("lines: %q", got)
	}
	if strings.Contains(string(r.Lines()), "hidden") {
		t.Fatal("a debug record below the level was kept")
	}
	if New(5).Lines() != nil && len(New(5).Lines()) != 0 {
		t.Fatal("an empty ring has lines")
	}
}
