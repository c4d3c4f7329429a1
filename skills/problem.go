package skills

import (
	"cmp"
	"fmt"
	"slices"
)

// Problem is one positioned error in a skill: File is relative to the
// folder given to Discover ("code-review/SKILL.md"); Line and Col are
// 1-based (Col counts bytes); Line 0 means the problem concerns the file or
// folder as a whole.
type Problem struct {
	File string
	Line int
	Col  int
	Msg  string
}

// String formats the problem as "file:line:col: msg" ("file: msg" when it
// has no position).
func (p Problem) String() string {
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.Msg)
}

// SortProblems orders problems by file, line, column and message, drops
// exact duplicates, and returns the shortened slice (ps is reordered in
// place).
func SortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col), cmp.Compare(a.Msg, b.Msg))
	})
	return slices.Compact(ps)
}
