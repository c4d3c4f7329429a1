package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentbox/agentbox/sandbox"
)

var _ sandbox.TerminalSandbox = (*Sandbox)(nil)

// terminalWrapper is execWrapper for a command on a pseudo-terminal. Its
// stdin is the terminal, whose line discipline would echo a preamble sent
// there onto the screen (secrets in the environment included): the
// preamble is written to a file first (mode 0600, by an exec without a
// terminal), which the wrapper reads and deletes ($0) before it gives the
// command the terminal back.
const terminalWrapper = unsetKubernetes + `exec 4<&0 <"$0"; rm -f "$0"
` + preambleLoop + `exec <&4 4<&-
exec env -- "$@"`

// StartTerminal runs req through an exec with a TTY: the container runtime
// allocates the pseudo-terminal in the pod, makes it the command's
// controlling terminal, and streams it raw (output and errors together).
// Output holds up to 1 MiB unread before the command is held back. It
// costs two execs: the preamble's file, then the command.
func (s *Sandbox) StartTerminal(ctx context.Context, req sandbox.TerminalRequest) (sandbox.Terminal, error) {
	cmd, req, err := sandbox.ResolveTerminal(ctx, s.ws, s.env, req)
	if err != nil {
		return nil, err
	}
	if s.isRemoved() || s.rt.pods.isGone(s.name) {
		return nil, fmt.Errorf("terminal in %s: %w", s.name, sandbox.ErrRemoved)
	}
	r := s.rt
	id := randHex(8)
	pidfile, prefile := "/tmp/.agentbox-exec-"+id, "/tmp/.agentbox-term-"+id
	pre := preamble(pidfile, cmd.Dir, cmd.Env, cmd.Argv, true)
	wctx, cancel := r.call(ctx)
	_, err = r.run1(wctx, s.name, []string{sandbox.Shell, "-c", `umask 077; cat >"$0"`, prefile}, bytes.NewReader(pre))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, s.execErr(fmt.Errorf("terminal: %w", err))
	}
	ex, err := r.executor(s.name, []string{sandbox.Shell, "-c", terminalWrapper, prefile}, true, true)
	if err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	sctx, cut := context.WithCancel(context.Background())
	t := &terminal{
		sb:      s,
		pidfile: pidfile,
		in:      inW,
		out:     sandbox.NewStream(1<<20, true),
		sizes:   make(chan remotecommand.TerminalSize),
		done:    make(chan struct{}),
		cutFn:   cut,
		first:   &remotecommand.TerminalSize{Height: req.Rows, Width: req.Cols},
	}
	s.mu.Lock()
	s.terms[t] = struct{}{}
	s.mu.Unlock()
	go t.run(sctx, ex, inR)
	return t, nil
}

// terminal is one exec started by StartTerminal.
type terminal struct {
	sb      *Sandbox
	pidfile string
	in      *io.PipeWriter
	out     *sandbox.Stream
	sizes   chan remotecommand.TerminalSize
	first   *remotecommand.TerminalSize
	done    chan struct{}
	code    int
	err     error
	cutFn   context.CancelFunc
	cutOnce sync.Once

	closeOnce sync.Once
	closeErr  error
}

// run streams the terminal until the command's output ends.
func (t *terminal) run(ctx context.Context, ex remotecommand.Executor, in *io.PipeReader) {
	err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: in, Stdout: t.out, Tty: true, TerminalSizeQueue: t})
	var ee utilexec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		t.code = ee.ExitStatus()
	default:
		t.code, t.err = -1, err
	}
	// Typing into an ended terminal fails rather than blocks.
	in.CloseWithError(io.ErrClosedPipe)
	t.out.Close()
	close(t.done)
	t.sb.mu.Lock()
	delete(t.sb.terms, t)
	t.sb.mu.Unlock()
}

// Next gives the exec its size: the requested one first, then each
// Resize (remotecommand.TerminalSizeQueue); nil once the terminal ends.
func (t *terminal) Next() *remotecommand.TerminalSize {
	if sz := t.first; sz != nil {
		t.first = nil
		return sz
	}
	select {
	case sz := <-t.sizes:
		return &sz
	case <-t.done:
		return nil
	}
}

func (t *terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

func (t *terminal) Write(p []byte) (int, error) {
	select {
	case <-t.done:
		return 0, fmt.Errorf("terminal: %w", io.ErrClosedPipe)
	default:
	}
	return t.in.Write(p)
}

// Resize hands the new size to the exec's stream, which sends it to the
// container runtime; the foreground program gets SIGWINCH.
func (t *terminal) Resize(ctx context.Context, rows, cols uint16) error {
	if err := sandbox.CheckSize(rows, cols); err != nil {
		return err
	}
	select {
	case t.sizes <- remotecommand.TerminalSize{Height: rows, Width: cols}:
		return nil
	case <-t.done:
		return fmt.Errorf("terminal resize: the terminal ended: %w", io.ErrClosedPipe)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wait waits for the command to exit and returns its exit code.
func (t *terminal) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	if t.err != nil {
		s := t.sb
		if s.isRemoved() || s.rt.pods.isGone(s.name) {
			return -1, fmt.Errorf("terminal in %s: %w", s.name, sandbox.ErrRemoved)
		}
		if t.wasCut() {
			return -1, nil // closed: the command was killed, its status is gone with the connection
		}
		return -1, s.execErr(t.err)
	}
	return t.code, nil
}

// Close kills the exec's process group and session (a shell's jobs too)
// unless it already ended, then cuts the connection. Idempotent.
func (t *terminal) Close() error {
	t.closeOnce.Do(func() {
		select {
		case <-t.done:
		default:
			if !t.sb.isRemoved() {
				ctx, cancel := context.WithTimeout(context.Background(), t.sb.rt.opts.CallTimeout)
				if err := t.sb.killGroup(ctx, t.pidfile); err != nil {
					t.closeErr = fmt.Errorf("terminal close in %s: %w", t.sb.name, err)
				}
				cancel()
			}
			// The output ends with the command; should a process that
			// left its session hold it, the connection is cut.
			select {
			case <-t.done:
			case <-time.After(2 * time.Second):
			}
		}
		t.cut()
		// Output nobody reads must not hold the stream: it ends here.
		t.out.CloseRead()
		<-t.done
	})
	return t.closeErr
}

// cut ends the exec's connection.
func (t *terminal) cut() {
	t.cutOnce.Do(t.cutFn)
}

func (t *terminal) wasCut() bool {
	select {
	case <-t.done:
	default:
		return false
	}
	return errors.Is(t.err, context.Canceled)
}
