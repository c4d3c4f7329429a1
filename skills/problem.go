package skills

import (
	"cmp"
	"fmt"
	"slices"
)

// Severity says whether a problem stops loading. The zero value is an
// error, so a Problem made without one is an error.
type Severity int

const (
	// SeverityError: the file cannot be used as written; loading fails.
	SeverityError Severity = iota
	// SeverityWarning: the file loads, but something in it is not honoured
	// the way its author may expect (a Yao-only feature, an ignored field).
	SeverityWarning
)

// Problem is one positioned problem in a skill: File is relative to the
// folder given to Discover ("code-review/SKILL.md"); Line and Col are
// 1-based (Col counts bytes); Line 0 means the problem concerns the file or
// folder as a whole. Severity is SeverityError unless set.
type Problem struct {
	File     string
	Line     int
	Col      int
	Msg      string
	Severity Severity
}

// Warning reports whether the problem is a warning rather than an error.
func (p Problem) Warning() bool { return p.Severity == SeverityWarning }

// String formats the problem as "file:line:col: msg" ("file: msg" when it
// has no position); a warning's message starts with "warning: ".
func (p Problem) String() string {
	msg := p.Msg
	if p.Warning() {
		msg = "warning: " + msg
	}
	if p.Line <= 0 {
		return fmt.Sprintf("%s: %s", p.File, msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, msg)
}

// SortProblems orders problems by file, line, column, severity (errors
// first) and message, drops exact duplicates, and returns the shortened
// slice (ps is reordered in place).
func SortProblems(ps []Problem) []Problem {
	slices.SortFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col), cmp.Compare(a.Severity, b.Severity), cmp.Compare(a.Msg, b.Msg))
	})
	return slices.Compact(ps)
}
