package ec2query

import (
	"slices"
	"strconv"
	"strings"
)

// Node is one key path of a decoded request: "Filter", "Filter.1",
// "Filter.1.Value.2". A node may carry a value, children, or (in a malformed
// request) both. Reading a value marks it used, so the handler can report
// every parameter it did not understand.
type Node struct {
	key      string
	value    string
	hasValue bool
	used     bool
	children map[string]*Node
}

func (n *Node) child(seg string, create bool) *Node {
	if c, ok := n.children[seg]; ok || !create {
		return c
	}
	if n.children == nil {
		n.children = map[string]*Node{}
	}
	key := seg
	if n.key != "" {
		key = n.key + "." + seg
	}
	c := &Node{key: key}
	n.children[seg] = c
	return c
}

// Key returns the node's full parameter name.
func (n *Node) Key() string { return n.key }

// Get returns the child called name, or nil. A nil Node behaves as absent.
func (n *Node) Get(name string) *Node {
	if n == nil {
		return nil
	}
	return n.children[name]
}

// Has reports whether the parameter name is present (with a value or as a
// list).
func (n *Node) Has(name string) bool { return n.Get(name) != nil }

// String returns the value of parameter name and marks it used.
func (n *Node) String(name string) (string, bool) {
	c := n.Get(name)
	if c == nil || !c.hasValue {
		return "", false
	}
	c.used = true
	return c.value, true
}

// Required returns the value of parameter name or a MissingParameter error.
func (n *Node) Required(name string) (string, error) {
	v, ok := n.String(name)
	if !ok || v == "" {
		return "", Errorf(CodeMissingParameter, "The request must contain the parameter %s", n.path(name))
	}
	return v, nil
}

// Int returns the integer value of parameter name.
func (n *Node) Int(name string) (v int, ok bool, err error) {
	s, ok := n.String(name)
	if !ok {
		return 0, false, nil
	}
	i, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if perr != nil {
		return 0, true, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for %s: expecting an integer", s, n.path(name))
	}
	return int(i), true, nil
}

// Bool returns the boolean value of parameter name.
func (n *Node) Bool(name string) (v bool, ok bool, err error) {
	s, ok := n.String(name)
	if !ok {
		return false, false, nil
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, Errorf(CodeInvalidParameterValue, "Invalid value '%s' for %s: expecting true or false", s, n.path(name))
}

// List returns the members of list parameter name (name.1, name.2, …) in
// index order. Non-numeric children stay unread and so are reported as
// unknown parameters.
func (n *Node) List(name string) []*Node {
	c := n.Get(name)
	if c == nil {
		return nil
	}
	type member struct {
		idx  int
		node *Node
	}
	var ms []member
	for seg, m := range c.children {
		idx, err := strconv.Atoi(seg)
		if err != nil || idx < 1 || strconv.Itoa(idx) != seg {
			continue
		}
		ms = append(ms, member{idx, m})
	}
	slices.SortFunc(ms, func(a, b member) int { return a.idx - b.idx })
	out := make([]*Node, len(ms))
	for i, m := range ms {
		out[i] = m.node
	}
	return out
}

// StringList returns the values of list parameter name (name.N).
func (n *Node) StringList(name string) ([]string, error) {
	members := n.List(name)
	if members == nil {
		return nil, nil
	}
	out := make([]string, 0, len(members))
	for _, m := range members {
		if !m.hasValue {
			return nil, Errorf(CodeInvalidParameterValue, "The parameter %s has no value", m.key)
		}
		m.used = true
		out = append(out, m.value)
	}
	return out, nil
}

func (n *Node) path(name string) string {
	if n == nil || n.key == "" {
		return name
	}
	return n.key + "." + name
}

// unused appends the keys of every value under n that was never read.
func (n *Node) unused(out []string) []string {
	if n.hasValue && !n.used && n.key != "" {
		out = append(out, n.key)
	}
	for _, c := range n.children {
		out = c.unused(out)
	}
	return out
}
