package ec2filter

import "testing"

// TestMatch: values compare as EC2's filters compare them: wildcards,
// escapes, and exact values.
func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"1", "1", true},
		{"1", "10", false},
		{"", "", true},
		{"pods-*", "pods-a", true},
		{"pods-*", "pods-", true},
		{"pods-*", "nodes-a", false},
		{"*-a", "pods-a", true},
		{"p?ds", "pods", true},
		{"p?ds", "pds", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{`a\?`, "a?", true},
		{`a\`, `a\`, true},
		{"**", "", true},
		{"abc", "abc", true}, {"a*", "abc", true}, {"*c", "abc", true}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"*", "", true}, {"*b*d", "abcd", true}, {"*b*d", "abce", false}, {"a**", "a", true},
	} {
		if got := Match(tc.pattern, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
