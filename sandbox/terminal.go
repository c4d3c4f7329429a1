package sandbox

import (
	"context"
	"fmt"
	"io"
)

// DefaultTerm is $TERM of a terminal command when the request names none:
// what xterm.js and most terminal emulators understand.
const DefaultTerm = "xterm-256color"

// Default size of a terminal whose request gives none.
const (
	DefaultRows = 24
	DefaultCols = 80
)

// TerminalRequest is a command to run on a pseudo-terminal inside a
// sandbox: an interactive shell, an editor.
type TerminalRequest struct {
	// Argv is the program and its arguments (a shell: {"bash", "-l"}).
	Argv []string
	// Env is added to the sandbox's environment; TERM defaults to
	// DefaultTerm.
	Env map[string]string
	// Dir is the working directory, as in ExecRequest ("" means Workdir).
	Dir string
	// Rows and Cols are the initial size (0: DefaultRows, DefaultCols).
	Rows, Cols uint16
}

// Terminal is a command running on a pseudo-terminal. Read returns what
// it writes (its output and errors together, as a terminal shows them,
// with the terminal's own echo of the input); Write types into it; the
// command is the terminal's foreground process, so a Ctrl-C written to
// it interrupts what runs there. Read and Write may be called from two
// goroutines; the other methods are safe for concurrent use.
type Terminal interface {
	io.ReadWriter
	// Resize changes the terminal's size; the foreground program gets
	// SIGWINCH.
	Resize(ctx context.Context, rows, cols uint16) error
	// Wait waits for the command to exit and returns its exit code (128+n
	// when a signal n killed it). When ctx ends first it returns ctx's
	// error and the command keeps running.
	Wait(ctx context.Context) (int, error)
	// Close kills the command and everything it started, and ends Read
	// (io.EOF after what was already read out). It is idempotent.
	Close() error
}

// TerminalSandbox is a Sandbox that runs commands on a pseudo-terminal.
// Both runtimes of this module implement it (sandbox/docker through the
// engine's exec with a TTY, sandbox/local with a pty on the host); a
// runtime that cannot says so in its conformance Features.
type TerminalSandbox interface {
	Sandbox
	// StartTerminal starts req on a new pseudo-terminal. The caller must
	// Close the terminal; removing the sandbox ends it too.
	StartTerminal(ctx context.Context, req TerminalRequest) (Terminal, error)
}

// ResolveTerminal checks req like ResolveExec (argv, env, working
// directory inside the workspace) for a sandbox with workspace ws and
// environment specEnv, fills in the defaults (TERM, rows and columns) and
// checks the size (CheckSize).
func ResolveTerminal(ctx context.Context, ws *Workspace, specEnv map[string]string, req TerminalRequest) (Command, TerminalRequest, error) {
	cmd, err := ResolveExec(ctx, ws, specEnv, ExecRequest{Argv: req.Argv, Env: withTerm(req.Env), Dir: req.Dir})
	if err != nil {
		return cmd, req, err
	}
	if req.Rows == 0 {
		req.Rows = DefaultRows
	}
	if req.Cols == 0 {
		req.Cols = DefaultCols
	}
	req.Env = withTerm(req.Env)
	return cmd, req, CheckSize(req.Rows, req.Cols)
}

// CheckSize refuses a terminal size no terminal has: a zero dimension,
// or more than 1000 rows or columns.
func CheckSize(rows, cols uint16) error {
	if rows == 0 || cols == 0 || rows > 1000 || cols > 1000 {
		return fmt.Errorf("terminal size %dx%d: want 1 to 1000 rows and columns", rows, cols)
	}
	return nil
}

func withTerm(env map[string]string) map[string]string {
	if _, ok := env["TERM"]; ok {
		return env
	}
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	out["TERM"] = DefaultTerm
	return out
}
