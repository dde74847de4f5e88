// Package ec2filter compares values the way EC2's Describe filters do, for
// awssim, which answers filters, and for the broker, which matches one
// combined search's results against each pod network's own tag filters.
package ec2filter

import "strings"

// Match matches s against an EC2 filter value as EC2 compares them: * is
// any run of characters, ? one character, and \ takes the next character
// as itself.
func Match(p, s string) bool {
	if !strings.ContainsAny(p, `*?\`) {
		return p == s
	}
	// Iterative matcher with backtracking to the last star: linear-ish, no
	// recursion, so a hostile pattern cannot blow the stack.
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch c := p[pi]; {
			case c == '*':
				starP, starS = pi, si
				pi++
				continue
			case c == '?':
				pi++
				si++
				continue
			case c == '\\' && pi+1 < len(p):
				if p[pi+1] == s[si] {
					pi += 2
					si++
					continue
				}
			case c == s[si]:
				pi++
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP+1, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
