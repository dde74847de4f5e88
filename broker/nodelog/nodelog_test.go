package nodelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestNodeNameBesideInstance(t *testing.T) {
	var buf bytes.Buffer
	names := &Names{}
	log := slog.New(names.Handler(slog.NewTextHandler(&buf, nil)))
	line := func(f func()) string {
		buf.Reset()
		f()
		return strings.TrimSpace(buf.String())
	}
	if got := line(func() { log.Info("x", "instance", "i-1") }); strings.Contains(got, "node=") {
		t.Fatalf("before a lookup is set: %s", got)
	}
	names.Use(func(id string) string { return map[string]string{"i-1": "node-a", "i-2": "node-b"}[id] })
	for _, c := range []struct {
		name string
		log  func()
		want string
	}{
		{"instance", func() { log.Info("x", "instance", "i-1") }, "instance=i-1 node=node-a"},
		{"instance_id", func() { log.Warn("x", "instance_id", "i-2", "err", "e") }, "instance_id=i-2 err=e node=node-b"},
		{"unknown instance", func() { log.Info("x", "instance", "i-9") }, "instance=i-9"},
		{"no instance", func() { log.Info("x", "eni", "eni-1") }, "eni=eni-1"},
		{"already named", func() { log.Info("x", "instance_id", "i-1", "node", "given") }, "instance_id=i-1 node=given"},
		{"with attrs", func() { log.With("instance", "i-2").Info("x", "eni", "eni-1") }, "instance=i-2 eni=eni-1 node=node-b"},
		{"with attrs named", func() { log.With("node", "given").Info("x", "instance", "i-2") }, "node=given instance=i-2"},
	} {
		got := line(c.log)
		if !strings.HasSuffix(got, c.want) || strings.Count(got, "node=") > strings.Count(c.want, "node=") {
			t.Errorf("%s: %s, want it to end %q", c.name, got, c.want)
		}
	}
}
