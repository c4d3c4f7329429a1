package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/sandbox"
)

var _ sandbox.TerminalSandbox = (*Sandbox)(nil)

// StartTerminal runs req through the engine's exec with a TTY: the engine
// allocates the pseudo-terminal in the container, makes it the command's
// controlling terminal, and streams it raw (output and errors together).
// Output holds up to 1 MiB unread before the command is held back.
func (s *Sandbox) StartTerminal(ctx context.Context, req sandbox.TerminalRequest) (sandbox.Terminal, error) {
	cmd, req, err := sandbox.ResolveTerminal(ctx, s.ws, s.env, req)
	if err != nil {
		return nil, err
	}
	if s.isRemoved() {
		return nil, fmt.Errorf("terminal in %s: %w", s.name, sandbox.ErrRemoved)
	}
	r := s.rt
	pidfile := "/tmp/.agentbox-exec-" + randHex(8)
	size := &[2]uint{uint(req.Rows), uint(req.Cols)}
	cctx, cancel := r.call(ctx)
	created, err := r.cli.ContainerExecCreate(cctx, s.id, container.ExecOptions{
		Cmd:          append([]string{"/bin/sh", "-c", execWrapper, pidfile}, cmd.Argv...),
		Env:          cmd.Env,
		WorkingDir:   cmd.Dir,
		Tty:          true,
		ConsoleSize:  size,
		AttachStdin:  true,
		AttachStdout: true,
		AttachStderr: true,
	})
	cancel()
	if err != nil {
		return nil, s.execErr(ctx, "terminal create", err)
	}
	actx, cancel := r.call(ctx)
	conn, err := r.cli.ContainerExecAttach(actx, created.ID, container.ExecAttachOptions{Tty: true, ConsoleSize: size})
	cancel()
	if err != nil {
		return nil, s.execErr(ctx, "terminal start", err)
	}
	t := &terminal{sb: s, execID: created.ID, pidfile: pidfile, conn: conn,
		out: sandbox.NewStream(1<<20, true), done: make(chan struct{})}
	s.mu.Lock()
	s.terms[t] = struct{}{}
	s.mu.Unlock()
	go t.pump()
	// Engines before API 1.42 ignore ConsoleSize: the size is set again
	// now the exec runs (as the docker CLI does).
	if err := t.Resize(ctx, req.Rows, req.Cols); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

// terminal is one exec started by StartTerminal.
type terminal struct {
	sb      *Sandbox
	execID  string
	pidfile string
	conn    types.HijackedResponse
	out     *sandbox.Stream
	done    chan struct{}

	closeOnce sync.Once
	closeErr  error
}

func (t *terminal) pump() {
	_, err := io.Copy(t.out, t.conn.Reader)
	t.out.CloseWithError(nil)
	_ = err // the stream ends with the exec or the connection; Wait tells which
	t.sb.mu.Lock()
	delete(t.sb.terms, t)
	t.sb.mu.Unlock()
	close(t.done)
}

func (t *terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

func (t *terminal) Write(p []byte) (int, error) {
	select {
	case <-t.done:
		return 0, fmt.Errorf("terminal: %w", io.ErrClosedPipe)
	default:
	}
	return t.conn.Conn.Write(p)
}

// Resize sets the exec's TTY size.
func (t *terminal) Resize(ctx context.Context, rows, cols uint16) error {
	if err := sandbox.CheckSize(rows, cols); err != nil {
		return err
	}
	r := t.sb.rt
	cctx, cancel := r.call(ctx)
	defer cancel()
	if err := r.cli.ContainerExecResize(cctx, t.execID, container.ResizeOptions{Height: uint(rows), Width: uint(cols)}); err != nil {
		return t.sb.execErr(ctx, "terminal resize", err)
	}
	return nil
}

// Wait waits for the stream to end, then asks the engine for the exit
// code (the exec may show as running for a moment after its output ends).
func (t *terminal) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	r := t.sb.rt
	deadline := time.Now().Add(r.opts.CallTimeout)
	for {
		ictx, cancel := r.call(ctx)
		ins, err := r.cli.ContainerExecInspect(ictx, t.execID)
		cancel()
		if err != nil {
			return -1, t.sb.execErr(ctx, "terminal inspect", err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, errors.New("terminal inspect: output ended but the command still runs")
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Close kills the exec's process group and session (a shell's jobs too)
// unless it already ended, then cuts the connection. Idempotent.
func (t *terminal) Close() error {
	t.closeOnce.Do(func() {
		select {
		case <-t.done:
		default:
			t.sb.mu.Lock()
			removed := t.sb.removed
			t.sb.mu.Unlock()
			if !removed {
				t.closeErr = t.sb.killGroup(t.pidfile)
			}
		}
		t.conn.Close()
		// Output nobody reads must not hold the pump: the stream ends here.
		t.out.CloseWithError(nil)
		<-t.done
		if errors.Is(t.closeErr, sandbox.ErrRemoved) {
			t.closeErr = nil
		}
	})
	return t.closeErr
}
