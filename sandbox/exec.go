package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// Shell is the program that runs ExecRequest.Shell scripts.
const Shell = "/bin/sh"

// Command is an ExecRequest checked and resolved for a runtime: what to run,
// where and with which environment.
type Command struct {
	// Argv is the program and its arguments (a shell script wrapped in
	// Shell -c).
	Argv []string
	// Dir is the working directory as the sandbox sees it (under Workdir);
	// it exists on the host side.
	Dir string
	// RelDir is Dir relative to the workspace ("." for Workdir), as the
	// result's Cwd reports it.
	RelDir string
	// Env is "KEY=value" pairs, the sandbox's then the request's (which
	// wins), sorted by key.
	Env []string
}

// ResolveExec checks req and turns it into a Command for a sandbox with
// workspace ws and environment specEnv: argv must name a program (exactly
// one script with Shell), env keys must be valid, and Dir must lie inside
// the workspace; it is created (confined, owned by the sandbox user) when
// missing.
func ResolveExec(ctx context.Context, ws *Workspace, specEnv map[string]string, req ExecRequest) (Command, error) {
	var c Command
	switch {
	case len(req.Argv) == 0:
		return c, errors.New("exec: empty command")
	case req.Shell && len(req.Argv) != 1:
		return c, fmt.Errorf("exec: a shell command is one script, got %d arguments", len(req.Argv))
	case req.Argv[0] == "":
		return c, errors.New("exec: empty program name")
	case req.Timeout < 0:
		return c, fmt.Errorf("exec: negative timeout %s", req.Timeout)
	}
	for _, a := range req.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return c, errors.New("exec: an argument contains a NUL byte")
		}
	}
	if req.Shell {
		c.Argv = []string{Shell, "-c", req.Argv[0]}
	} else {
		c.Argv = append([]string(nil), req.Argv...)
	}
	rel, err := Rel(req.Dir)
	if err != nil {
		return c, fmt.Errorf("exec: working directory: %w", err)
	}
	if ws == nil {
		return c, errors.New("exec: sandbox has no workspace")
	}
	if err := ws.MkdirAll(ctx, rel); err != nil {
		return c, fmt.Errorf("exec: working directory: %w", err)
	}
	if rel != "." {
		if st, err := ws.Stat(ctx, rel); err != nil || !st.IsDir {
			return c, fmt.Errorf("exec: working directory %q is not a folder", req.Dir)
		}
	}
	c.RelDir = rel
	c.Dir = path.Join(Workdir, rel)
	env, err := MergeEnv(specEnv, req.Env)
	if err != nil {
		return c, fmt.Errorf("exec: %w", err)
	}
	c.Env = env
	return c, nil
}

// MergeEnv merges environment maps (later ones win) into sorted
// "KEY=value" pairs, rejecting keys that are empty or hold '=' or NUL, and
// values holding NUL.
func MergeEnv(maps ...map[string]string) ([]string, error) {
	m := map[string]string{}
	for _, mm := range maps {
		for k, v := range mm {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, fmt.Errorf("environment variable name %q is invalid", k)
			}
			if strings.IndexByte(v, 0) >= 0 {
				return nil, fmt.Errorf("environment variable %s holds a NUL byte", k)
			}
			m[k] = v
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+m[k])
	}
	return out, nil
}

// TimeoutError is the error of a command killed by its timeout; it wraps
// ErrExecTimeout.
func TimeoutError(d time.Duration) error {
	return fmt.Errorf("%w after %s", ErrExecTimeout, d)
}

// CappedBuffer keeps the first Max bytes written to it and records whether
// more came (Truncated). Writes never fail, so the producer is drained.
type CappedBuffer struct {
	Max       int
	buf       []byte
	Truncated bool
}

// Write keeps what fits under Max and drops the rest.
func (b *CappedBuffer) Write(p []byte) (int, error) {
	room := b.Max - len(b.buf)
	if room < len(p) {
		b.Truncated = true
		if room > 0 {
			b.buf = append(b.buf, p[:room]...)
		}
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// String returns what was kept.
func (b *CappedBuffer) String() string { return string(b.buf) }

// Collect reads a started process to its end: stdout and stderr captured up
// to max bytes each (0: DefaultMaxOutput), then its exit code. It is how
// runtimes build Exec on top of Start. On an error (timeout, ctx) the
// result still holds the output captured so far.
func Collect(ctx context.Context, p Process, max int, cmd Command, start time.Time) (*ExecResult, error) {
	if max <= 0 {
		max = DefaultMaxOutput
	}
	out, errb := &CappedBuffer{Max: max}, &CappedBuffer{Max: max}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(out, p.Stdout()) }()
	go func() { defer wg.Done(); _, _ = io.Copy(errb, p.Stderr()) }()
	code, err := p.Wait(ctx)
	wg.Wait()
	res := &ExecResult{
		ExitCode:  code,
		Stdout:    out.String(),
		Stderr:    errb.String(),
		Truncated: out.Truncated || errb.Truncated,
		Cwd:       cmd.RelDir,
		Duration:  time.Since(start),
	}
	return res, err
}

// CheckMounts validates extra mounts: absolute, existing sources; absolute
// targets that are not the root, Workdir or under it, each used once. It
// returns them with cleaned paths.
func CheckMounts(ms []Mount) ([]Mount, error) {
	out := make([]Mount, 0, len(ms))
	seen := map[string]bool{}
	for _, m := range ms {
		if !path.IsAbs(m.Source) || !path.IsAbs(m.Target) {
			return nil, fmt.Errorf("mount %q -> %q: source and target must be absolute paths", m.Source, m.Target)
		}
		src, dst := path.Clean(m.Source), path.Clean(m.Target)
		switch {
		case dst == "/":
			return nil, fmt.Errorf("mount %q: cannot mount over /", m.Source)
		case dst == Workdir || strings.HasPrefix(dst, Workdir+"/"):
			return nil, fmt.Errorf("mount %q -> %q: the workspace %s cannot be a mount target", m.Source, m.Target, Workdir)
		case seen[dst]:
			return nil, fmt.Errorf("mount target %q used twice", dst)
		}
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("mount source %q: %w", src, err)
		}
		seen[dst] = true
		out = append(out, Mount{Source: src, Target: dst, Writable: m.Writable})
	}
	return out, nil
}
