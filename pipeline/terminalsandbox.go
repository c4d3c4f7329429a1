package pipeline

import "github.com/agentbox/agentbox/sandbox"

// Sandbox is the terminal's sandbox, for a caller that runs commands and
// file operations in it beside the shell (a script test's ctx.sandbox).
// It is the same sandbox the shell runs in, and goes when the terminal is
// closed.
func (t *Terminal) Sandbox() sandbox.Sandbox { return t.sb }
