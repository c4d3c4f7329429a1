// Package hint finds the name a misspelt one was meant to be, for "did you
// mean" hints in configuration problems (the app loader, strict option
// decoding).
package hint

import "strings"

// Closest returns the name among names closest to name (case-insensitive
// edit distance below 3), or "" when none is that close.
func Closest(name string, names []string) string {
	best, bestD := "", 3
	lower := strings.ToLower(name)
	for _, n := range names {
		if d := distance(lower, strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the Levenshtein distance between short names (99 for long
// ones, which are never close).
func distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
