// Package nodelog puts a node's Kubernetes name beside its instance ID in
// the broker's log lines. Admins think in node names; the broker's records
// and most of its code know nodes by instance ID, so instead of threading
// the name through every component, the log handler adds it to any line
// that names an instance.
package nodelog

import (
	"context"
	"log/slog"
	"sync/atomic"
)

// Key is the attribute the name is logged under.
const Key = "node"

// instanceKeys are the attributes broker code names an instance by.
var instanceKeys = map[string]bool{"instance": true, "instance_id": true}

// Names looks up node names. Its lookup is set once the component that
// knows them exists (the gRPC server's view of the node records); until
// then, and for instances it does not know, lines go out unchanged.
type Names struct {
	lookup atomic.Pointer[func(instanceID string) string]
}

// Use sets the lookup.
func (n *Names) Use(lookup func(instanceID string) string) { n.lookup.Store(&lookup) }

func (n *Names) name(id string) string {
	if f := n.lookup.Load(); f != nil && id != "" {
		return (*f)(id)
	}
	return ""
}

// Handler wraps h.
func (n *Names) Handler(h slog.Handler) slog.Handler { return &handler{next: h, names: n} }

type handler struct {
	next  slog.Handler
	names *Names
	// instance is the instance a WithAttrs call named, and named says
	// whether a node attribute was given there already.
	instance string
	named    bool
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	id, named := h.instance, h.named
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case a.Key == Key:
			named = true
		case instanceKeys[a.Key] && a.Value.Kind() == slog.KindString:
			id = a.Value.String()
		}
		return true
	})
	if !named {
		if name := h.names.name(id); name != "" {
			r = r.Clone()
			r.AddAttrs(slog.String(Key, name))
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(attrs)
	for _, a := range attrs {
		switch {
		case a.Key == Key:
			c.named = true
		case instanceKeys[a.Key] && a.Value.Kind() == slog.KindString:
			c.instance = a.Value.String()
		}
	}
	return &c
}

// WithGroup: attributes after a group are the group's, so lines are left
// as they are from there on.
func (h *handler) WithGroup(name string) slog.Handler {
	return h.next.WithGroup(name)
}
