package assistant

import (
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/hint"
	"github.com/agentbox/agentbox/skills"
)

// Problem is one thing wrong with an app folder, positioned in its file:
// the same type skills reports, so a skill's problems need no conversion.
// In an app's problems, File is relative to the app root with forward
// slashes; Line and Col are 1-based (Col counts bytes in JSONC files and
// characters in YAML, as yaml.v3 reports them). Line 0 means the problem
// concerns a file or folder as a whole (a missing file, a bad folder name).
type Problem = skills.Problem

// Severity says whether a problem stops the app from loading.
type Severity = skills.Severity

// Severities of problems: an error stops the app from loading; a warning
// says what loads but is not honoured as its author may expect.
const (
	SeverityError   = skills.SeverityError
	SeverityWarning = skills.SeverityWarning
)

// hasErrors reports whether ps holds an error (not only warnings).
func hasErrors(ps []Problem) bool {
	for _, p := range ps {
		if !p.Warning() {
			return true
		}
	}
	return false
}

// splitProblems returns the errors and the warnings of ps, in order.
func splitProblems(ps []Problem) (errs, warns []Problem) {
	for _, p := range ps {
		if p.Warning() {
			warns = append(warns, p)
		} else {
			errs = append(errs, p)
		}
	}
	return errs, warns
}

// LoadError is what Load returns when an app folder has errors. It lists
// all of them, sorted by file and position, not just the first.
type LoadError struct {
	// Root is the app folder's absolute path.
	Root string
	// Problems are the errors.
	Problems []Problem
	// Warnings are the warnings found alongside (not in Error's text).
	Warnings []Problem
}

// maxErrorLines bounds Error's text; Problems always has every problem.
const maxErrorLines = 10

// Error lists the problems, one a line (at most 10, then a count).
func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "app %s: %d problem", e.Root, len(e.Problems))
	if len(e.Problems) != 1 {
		b.WriteString("s")
	}
	for i, p := range e.Problems {
		if i == maxErrorLines {
			fmt.Fprintf(&b, "\n\t... and %d more (run agentbox check)", len(e.Problems)-i)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// SortProblems orders problems by file, line, column and message, and drops
// exact duplicates (skills.SortProblems).
func SortProblems(ps []Problem) []Problem { return skills.SortProblems(ps) }

// lineCol converts a byte offset in src to a 1-based line and byte column.
func lineCol(src []byte, off int) (line, col int) {
	if off > len(src) {
		off = len(src)
	}
	if off < 0 {
		off = 0
	}
	line, start := 1, 0
	for i := 0; i < off; i++ {
		if src[i] == '\n' {
			line++
			start = i + 1
		}
	}
	return line, off - start + 1
}

// suggest returns a "did you mean" hint for a misspelt field name, or the
// list of valid names.
func suggest(name string, names []string) string {
	if best := hint.Closest(name, names); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(names) == 0 {
		return ""
	}
	return " (known: " + strings.Join(names, ", ") + ")"
}

// hintAmong returns a "did you mean" hint for name among names, else the
// names when they are few, else nothing. what names them ("defined").
func hintAmong(name string, names []string, what string) string {
	h := suggest(name, names)
	if strings.HasPrefix(h, " (did you mean") || len(names) <= 8 {
		return strings.Replace(h, "(known:", "("+what+":", 1)
	}
	return ""
}
