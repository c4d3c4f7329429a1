package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/agentbox/agentbox/sandbox"
)

var _ sandbox.TerminalSandbox = (*Sandbox)(nil)

// setsidProgram makes the command a session of its own whose controlling
// terminal is its standard input (util-linux setsid -c), inside the
// sandbox.
const setsidProgram = "setsid"

// StartTerminal runs req under bubblewrap on a pseudo-terminal allocated
// on the host (creack/pty). bwrap starts in a session of its own without
// a controlling terminal; inside, `setsid -c` makes the command a new
// session that takes the pty as its controlling terminal, so a Ctrl-C
// reaches the command's foreground job and never bwrap outside.
//
// bwrap's --new-session is left out here: it guards a sandbox that shares
// the caller's terminal from pushing input into it (TIOCSTI), while this
// pty is the command's own, fed only by whoever holds the Terminal.
func (s *Sandbox) StartTerminal(ctx context.Context, req sandbox.TerminalRequest) (sandbox.Terminal, error) {
	cmd, req, err := sandbox.ResolveTerminal(ctx, s.ws, s.env, req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	args := slices.DeleteFunc(slices.Clone(s.args), func(a string) bool { return a == "--new-session" })
	args = append(args, "--chdir", cmd.Dir, "--", setsidProgram, "-c")
	args = append(args, cmd.Argv...)
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("terminal: open a pty: %w", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: req.Rows, Cols: req.Cols}); err != nil {
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("terminal: size: %w", err)
	}
	c := exec.Command(s.rt.bwrap, args...)
	c.Env = cmd.Env
	c.Stdin, c.Stdout, c.Stderr = tty, tty, tty
	c.SysProcAttr = &syscall.SysProcAttr{Credential: s.rt.cred, Setsid: true}
	t := &terminal{sb: s, cmd: c, master: master, out: sandbox.NewStream(1<<20, true),
		pumped: make(chan struct{}), exited: make(chan struct{})}

	s.mu.Lock()
	if s.removed {
		s.mu.Unlock()
		master.Close()
		tty.Close()
		return nil, fmt.Errorf("terminal in %s: %w", s.id, sandbox.ErrRemoved)
	}
	err = c.Start()
	tty.Close() // the command holds it now
	if err != nil {
		s.mu.Unlock()
		master.Close()
		return nil, fmt.Errorf("terminal: bwrap: %w: %w", sandbox.ErrEngineUnavailable, err)
	}
	s.terms[t] = struct{}{}
	s.mu.Unlock()
	go t.pump()
	go t.wait()
	return t, nil
}

// terminal is one bwrap invocation on a pty.
type terminal struct {
	sb     *Sandbox
	cmd    *exec.Cmd
	master *os.File
	out    *sandbox.Stream
	pumped chan struct{}
	exited chan struct{}
	code   int

	closeOnce sync.Once
	killOnce  sync.Once
}

// pump copies the pty's output until every holder of its other end is
// gone (the master then reads EIO) or it is closed.
func (t *terminal) pump() {
	_, _ = io.Copy(t.out, t.master)
	t.out.CloseWithError(nil)
	close(t.pumped)
}

func (t *terminal) wait() {
	_ = t.cmd.Wait()
	t.code = t.cmd.ProcessState.ExitCode()
	if ws, ok := t.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.code = 128 + int(ws.Signal())
	}
	t.sb.mu.Lock()
	delete(t.sb.terms, t)
	t.sb.mu.Unlock()
	close(t.exited)
	// Output still buffered in the pty is read out, unless a process that
	// escaped the group keeps it open.
	select {
	case <-t.pumped:
	case <-time.After(2 * time.Second):
		t.master.Close()
	}
}

func (t *terminal) Read(p []byte) (int, error) { return t.out.Read(p) }

func (t *terminal) Write(p []byte) (int, error) {
	select {
	case <-t.exited:
		return 0, fmt.Errorf("terminal: %w", io.ErrClosedPipe)
	default:
	}
	return t.master.Write(p)
}

// Resize sets the pty's window size; the kernel signals the foreground
// process group.
func (t *terminal) Resize(ctx context.Context, rows, cols uint16) error {
	if err := sandbox.CheckSize(rows, cols); err != nil {
		return err
	}
	if err := pty.Setsize(t.master, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		return fmt.Errorf("terminal resize: %w", err)
	}
	return nil
}

// Wait waits for bwrap to exit, which it does with its command.
func (t *terminal) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.exited:
		return t.code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// kill kills the pid namespace through its init, then bwrap's process
// group (the same way execution.Kill does).
func (t *terminal) kill() {
	t.killOnce.Do(func() {
		select {
		case <-t.exited:
			return
		default:
		}
		pid := t.cmd.Process.Pid
		for _, child := range childrenOf(pid) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	})
}

// Close kills the command unless it ended, waits for it (a few seconds
// at most), and closes the pty. Idempotent.
func (t *terminal) Close() error {
	var err error
	t.closeOnce.Do(func() {
		t.kill()
		select {
		case <-t.exited:
		case <-time.After(5 * time.Second):
			err = errors.New("terminal: the command did not end after it was killed")
		}
		t.master.Close()
		t.out.CloseWithError(nil)
		<-t.pumped
	})
	return err
}
