package subnets

import "testing"

// TestFilterMatch: tag values compare as EC2's filters compare them, so
// one search for several pod networks finds what a search each would.
func TestFilterMatch(t *testing.T) {
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
	} {
		if got := filterMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("filterMatch(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
