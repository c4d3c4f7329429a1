package sandboxtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// testTerminal: commands on a pseudo-terminal (sandbox.TerminalSandbox):
// an interactive shell that sees a terminal of the requested size, TERM,
// the workspace, a resize, its exit status; Ctrl-C reaching the
// foreground command; Close and Remove killing what runs there.
func (c *suite) testTerminal(t *testing.T) {
	if c.f.NoTerminal != "" {
		t.Skipf("the runtime runs no terminals: %s", c.f.NoTerminal)
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, ts sandbox.TerminalSandbox)
	}{
		{"Interactive", c.testTerminalInteractive},
		{"CtrlC", c.testTerminalCtrlC},
		{"CloseKills", c.testTerminalClose},
		{"RemoveEnds", c.testTerminalRemove},
		{"BadRequests", c.testTerminalBad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sb := c.sandbox(t, nil)
			ts, ok := sb.(sandbox.TerminalSandbox)
			if !ok {
				t.Fatalf("%T does not implement sandbox.TerminalSandbox: implement it, or set Features.NoTerminal with the reason", sb)
			}
			tc.run(t, ts)
		})
	}
}

// screen collects a terminal's output as it comes.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
	done chan struct{}
}

func watch(term io.Reader) *screen {
	s := &screen{more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := term.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// await waits up to 20 seconds for want to appear after from (an offset
// into the output) and returns the offset just past it.
func (s *screen) await(t *testing.T, from int, want string) int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		out := s.String()
		if from <= len(out) {
			if i := strings.Index(out[from:], want); i >= 0 {
				return from + i + len(want)
			}
		}
		select {
		case <-s.more:
		case <-s.done:
			if out := s.String(); !strings.Contains(out[min(from, len(out)):], want) {
				t.Fatalf("the terminal ended without printing %q; it printed:\n%q", want, out)
			}
		case <-deadline:
			t.Fatalf("the terminal did not print %q within 20s; it printed:\n%q", want, s.String())
		}
	}
}

func startTerminal(t *testing.T, ts sandbox.TerminalSandbox, req sandbox.TerminalRequest) sandbox.Terminal {
	t.Helper()
	term, err := ts.StartTerminal(context.Background(), req)
	if err != nil {
		t.Fatalf("start terminal: %v", err)
	}
	t.Cleanup(func() { _ = term.Close() })
	return term
}

func typeIn(t *testing.T, term sandbox.Terminal, s string) {
	t.Helper()
	if _, err := io.WriteString(term, s); err != nil {
		t.Fatalf("type %q: %v", s, err)
	}
}

func waitExit(t *testing.T, term sandbox.Terminal, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code, err := term.Wait(ctx)
	if code != want || err != nil {
		t.Errorf("wait = %d, %v; want %d, nil", code, err, want)
	}
}

func (c *suite) testTerminalInteractive(t *testing.T, ts sandbox.TerminalSandbox) {
	if err := ts.Workspace().WriteFile(context.Background(), "seen.txt", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	term := startTerminal(t, ts, sandbox.TerminalRequest{Argv: []string{"sh"}, Rows: 30, Cols: 100, Env: map[string]string{"PS1": "$ "}})
	scr := watch(term)
	// Markers are printed by arithmetic, so the terminal's echo of the
	// typed line never matches them.
	typeIn(t, term, `test -t 0 && test -t 1 && echo "tty-$((1+1))"; stty size; echo "term=$TERM" "pwd=$(pwd)"; ls; echo "end-$((2+1))"`+"\n")
	at := scr.await(t, 0, "tty-2")
	end := scr.await(t, at, "end-3")
	out := scr.String()[at:end]
	for _, want := range []string{"30 100", "term=" + sandbox.DefaultTerm, "pwd=" + sandbox.Workdir, "seen.txt"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%q", want, out)
		}
	}
	if err := term.Resize(context.Background(), 40, 120); err != nil {
		t.Fatalf("resize: %v", err)
	}
	// A resize may reach the terminal after input sent later (Kubernetes
	// carries them on separate streams): it must be seen promptly.
	deadline := time.Now().Add(prompt)
	for i, from := 0, end; ; i++ {
		typeIn(t, term, fmt.Sprintf(`stty size; echo "end-$((4+%d))"`, i)+"\n")
		to := scr.await(t, from, fmt.Sprintf("end-%d", 4+i))
		out := scr.String()[from:to]
		if strings.Contains(out, "40 120") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after resize to 40x120, stty size printed:\n%q", out)
			break
		}
		from = to
		time.Sleep(100 * time.Millisecond)
	}
	if err := term.Resize(context.Background(), 0, 10); err == nil {
		t.Error("resize to 0x10: no error")
	}
	typeIn(t, term, "exit 3\n")
	waitExit(t, term, 3)
	select {
	case <-scr.done:
	case <-time.After(prompt):
		t.Error("the output did not end after the command exited")
	}
	if _, err := io.WriteString(term, "echo late\n"); err == nil {
		t.Error("write after exit: no error")
	}
	if err := term.Close(); err != nil {
		t.Errorf("close after exit: %v", err)
	}
}

// testTerminalCtrlC: a Ctrl-C typed into the terminal interrupts its
// foreground command, which handles it.
func (c *suite) testTerminalCtrlC(t *testing.T, ts sandbox.TerminalSandbox) {
	script := `trap 'echo "got-$((40+2))"; exit 5' INT; echo "ready-$((1+1))"; while :; do sleep 0.1; done`
	term := startTerminal(t, ts, sandbox.TerminalRequest{Argv: []string{"sh", "-c", script}})
	scr := watch(term)
	at := scr.await(t, 0, "ready-2")
	typeIn(t, term, "\x03")
	scr.await(t, at, "got-42")
	waitExit(t, term, 5)
}

// testTerminalClose: Close kills the command and what it started, and
// ends the output.
func (c *suite) testTerminalClose(t *testing.T, ts sandbox.TerminalSandbox) {
	marker := sleepMarker()
	term := startTerminal(t, ts, sandbox.TerminalRequest{Argv: []string{"sh", "-c", fmt.Sprintf(`echo "up-$((1+1))"; sleep %s & sleep %s`, marker, marker)}})
	scr := watch(term)
	scr.await(t, 0, "up-2")
	c.awaitSleeps(ts, marker, 2)
	start := time.Now()
	if err := term.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("close took %s", d)
	}
	select {
	case <-scr.done:
	case <-time.After(prompt):
		t.Error("the output did not end after Close")
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	if _, err := term.Wait(ctx); err != nil {
		t.Errorf("wait after close: %v", err)
	}
	c.checkNothingLeft(t, ts, marker, "")
	if err := term.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// testTerminalRemove: removing the sandbox ends its terminals.
func (c *suite) testTerminalRemove(t *testing.T, ts sandbox.TerminalSandbox) {
	term := startTerminal(t, ts, sandbox.TerminalRequest{Argv: []string{"sh", "-c", `echo "up-$((1+1))"; exec sleep 300`}})
	scr := watch(term)
	scr.await(t, 0, "up-2")
	if err := ts.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-scr.done:
	case <-time.After(prompt):
		t.Fatal("the terminal's output did not end when the sandbox was removed")
	}
	if _, err := ts.StartTerminal(context.Background(), sandbox.TerminalRequest{Argv: []string{"sh"}}); err == nil {
		t.Error("a removed sandbox started a terminal")
	}
}

// testTerminalBad: requests that cannot run are errors.
func (c *suite) testTerminalBad(t *testing.T, ts sandbox.TerminalSandbox) {
	for _, req := range []sandbox.TerminalRequest{
		{},
		{Argv: []string{"sh"}, Dir: "../x"},
		{Argv: []string{"sh"}, Env: map[string]string{"A=B": "x"}},
		{Argv: []string{"sh"}, Rows: 5000, Cols: 80},
	} {
		if term, err := ts.StartTerminal(context.Background(), req); err == nil {
			_ = term.Close()
			t.Errorf("StartTerminal %+v: no error", req)
		}
	}
}
