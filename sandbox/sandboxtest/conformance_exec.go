package sandboxtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// testExec: argv and shell commands, exit codes, stdout and stderr apart,
// stdin, env, working directory and output caps.
func (c *suite) testExec(t *testing.T) {
	sb := c.sandbox(t, func(s *sandbox.Spec) { s.Env = map[string]string{"FROM_SPEC": "spec", "OVER": "spec"} })
	cases := []struct {
		name      string
		req       sandbox.ExecRequest
		code      int
		stdout    string
		stderr    string // "*" is anything naming the program
		cwd       string
		truncated bool
	}{
		{name: "exit 0", req: sandbox.ExecRequest{Argv: []string{"echo", "hi"}}, stdout: "hi\n", cwd: "."},
		{name: "exit code", req: sandbox.ExecRequest{Argv: []string{"exit 7"}, Shell: true}, code: 7, cwd: "."},
		{name: "killed by a signal", req: sandbox.ExecRequest{Argv: []string{"kill -9 $$"}, Shell: true}, code: 137, cwd: "."},
		{name: "not found", req: sandbox.ExecRequest{Argv: []string{"no-such-program"}}, code: c.f.MissingProgramExit, stderr: "*", cwd: "."},
		{name: "stderr apart", req: sandbox.ExecRequest{Argv: []string{"echo out; echo err >&2"}, Shell: true}, stdout: "out\n", stderr: "err\n", cwd: "."},
		{name: "argv not a shell", req: sandbox.ExecRequest{Argv: []string{"echo", "$HOME; rm -rf x", "'q'"}}, stdout: "$HOME; rm -rf x 'q'\n", cwd: "."},
		{name: "stdin", req: sandbox.ExecRequest{Argv: []string{"cat"}, Stdin: strings.NewReader("from stdin")}, stdout: "from stdin", cwd: "."},
		{name: "no stdin", req: sandbox.ExecRequest{Argv: []string{"cat"}, Timeout: 10 * time.Second}, cwd: "."},
		{name: "env", req: sandbox.ExecRequest{Argv: []string{"echo $FROM_SPEC $OVER $HOME ${" + hostEnvKey + ":-clean}"}, Shell: true, Env: map[string]string{"OVER": "req"}},
			stdout: "spec req " + c.f.Home + " clean\n", cwd: "."},
		{name: "cwd created", req: sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "a/b"}, stdout: "/workspace/a/b\n", cwd: "a/b"},
		{name: "cwd absolute", req: sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "/workspace/a"}, stdout: "/workspace/a\n", cwd: "a"},
		{name: "truncated", req: sandbox.ExecRequest{Argv: []string{"head -c 5000 /dev/zero | tr '\\0' x"}, Shell: true, MaxOutput: 100}, stdout: strings.Repeat("x", 100), truncated: true, cwd: "."},
		{name: "truncated stderr", req: sandbox.ExecRequest{Argv: []string{"head -c 5000 /dev/zero | tr '\\0' y >&2"}, Shell: true, MaxOutput: 10}, stderr: strings.Repeat("y", 10), truncated: true, cwd: "."},
		{name: "at the cap", req: sandbox.ExecRequest{Argv: []string{"printf", "12345"}, MaxOutput: 5}, stdout: "12345", cwd: "."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := mustExec(t, sb, tc.req)
			stderrOK := res.Stderr == tc.stderr || tc.stderr == "*" && strings.Contains(res.Stderr, tc.req.Argv[0])
			if res.ExitCode != tc.code || res.Stdout != tc.stdout || !stderrOK || res.Truncated != tc.truncated || res.Cwd != tc.cwd {
				t.Errorf("got code=%d stdout=%q stderr=%q truncated=%v cwd=%q; want code=%d stdout=%q stderr=%q truncated=%v cwd=%q",
					res.ExitCode, res.Stdout, res.Stderr, res.Truncated, res.Cwd, tc.code, tc.stdout, tc.stderr, tc.truncated, tc.cwd)
			}
		})
	}
}

// testBadRequests: requests that cannot run are errors, from Exec and
// Start alike, and nothing runs.
func (c *suite) testBadRequests(t *testing.T) {
	sb := c.sandbox(t, nil)
	for _, req := range []sandbox.ExecRequest{
		{},
		{Argv: []string{""}},
		{Argv: []string{"a", "b"}, Shell: true},
		{Argv: []string{"pwd"}, Dir: "../x"},
		{Argv: []string{"pwd"}, Dir: "/etc"},
		{Argv: []string{"pwd"}, Env: map[string]string{"A=B": "x"}},
		{Argv: []string{"echo", "a\x00b"}},
		{Argv: []string{"pwd"}, Timeout: -time.Second},
	} {
		if _, err := sb.Exec(context.Background(), req); err == nil {
			t.Errorf("Exec %+v: no error", req)
		}
		if p, err := sb.Start(context.Background(), req); err == nil {
			_, _ = p.Wait(context.Background())
			t.Errorf("Start %+v: no error", req)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(sb.Workspace().Dir(), "evil")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"pwd"}, Dir: "evil/sub"}); !errors.Is(err, sandbox.ErrPathOutside) {
		t.Errorf("cwd through a symlink out: err = %v, want ErrPathOutside", err)
	}
}

// testExecCanceled: Exec with a context that ended, or ends while the
// command runs, returns the context's error promptly.
func (c *suite) testExecCanceled(t *testing.T) {
	sb := c.sandbox(t, nil)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sb.Exec(done, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Exec with an ended context: err = %v, want context.Canceled", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sleep", "30"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Exec cancelled while running: err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("the cancelled Exec returned after %s", d)
	}
}

// testTimeout: a command past its timeout is killed with every process it
// started (nothing keeps running, in the sandbox or on the host), and Exec
// returns ErrExecTimeout with the output so far.
func (c *suite) testTimeout(t *testing.T) {
	sb := c.sandbox(t, nil)
	marker := sleepMarker()
	trace := "trace-" + randHex(4)
	script := fmt.Sprintf("echo started; sleep %s & %s sleep %s", marker, traceWriter(trace), marker)
	start := time.Now()
	// The timeout leaves a loaded machine time to run the first echo.
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{script}, Shell: true, Timeout: 2 * time.Second})
	if !errors.Is(err, sandbox.ErrExecTimeout) {
		t.Fatalf("err = %v, want ErrExecTimeout", err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("the timeout took %s", d)
	}
	if res == nil || res.Stdout != "started\n" {
		t.Errorf("partial result = %+v, want stdout %q", res, "started\n")
	}
	c.checkNothingLeft(t, sb, marker, trace)
}

// traceWriter is a background job for a command's script that writes
// trace in the workspace once trace's gate file appears there: a process
// of the command that outlived its end (checkNothingLeft opens the gate
// then) leaves the trace. It waits on the gate rather than on time, so a
// kill that is slow on a loaded machine is not taken for one that missed
// a process.
func traceWriter(trace string) string {
	return fmt.Sprintf("(until [ -e %[1]s/%[2]s.gate ]; do sleep 0.05; done; touch %[1]s/%[2]s) &", sandbox.Workdir, trace)
}

// checkNothingLeft waits for the processes holding marker to be gone from
// the host (bounded), checks that the sandbox lists none (when it is
// still there), then opens the gate of the command's traceWriter (if it
// had one) and checks that no process of the command is left to write
// the trace.
func (c *suite) checkNothingLeft(t *testing.T, sb sandbox.Sandbox, marker, trace string) {
	t.Helper()
	deadline := time.Now().Add(prompt)
	for len(hostProcesses(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := hostProcesses(marker); len(left) > 0 {
		t.Errorf("processes left behind on the host: %v", left)
	}
	if ps, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"ps", "-eo", "args"}}); err == nil && strings.Contains(ps.Stdout, marker) {
		t.Errorf("processes left behind in the sandbox:\n%s", ps.Stdout)
	}
	if trace == "" {
		return
	}
	// The gate is opened from inside when the sandbox is still there (a
	// sandbox with a kernel of its own may not see a host's new file at
	// once), and from the host too.
	gate := trace + ".gate"
	if err := os.WriteFile(filepath.Join(sb.Workspace().Dir(), gate), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _ = sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"touch", gate}})
	// A process left behind sees the gate within 50ms of running; this
	// waits for something not to happen, so its length only decides how
	// surely a leftover on a loaded machine is caught.
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(sb.Workspace().Dir(), trace)); err == nil {
		t.Error("a background process of the killed command kept running (it wrote its trace)")
	}
}

// sleepMarker is a `sleep` argument unique to one check, found again in
// process listings.
func sleepMarker() string {
	return fmt.Sprintf("100.%d%d", time.Now().UnixNano()%1_000_000, os.Getpid()%1000)
}

// testStartStreams: Start streams stdout as it is written, takes stdin,
// and keeps stderr apart.
func (c *suite) testStartStreams(t *testing.T) {
	sb := c.sandbox(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	// The second line of input is sent only once the first line of output
	// arrived: output held back until the command ends never arrives
	// (the context then kills the command).
	stdin, feed, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	defer feed.Close()
	if _, err := feed.WriteString("hello\n"); err != nil {
		t.Fatal(err)
	}
	p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"read x; echo got $x; echo line2 >&2; read y; echo late $y"}, Shell: true, Stdin: stdin})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	if !sc.Scan() || sc.Text() != "got hello" {
		t.Fatalf("first line = %q (%v): not streamed before the command ended", sc.Text(), sc.Err())
	}
	if _, err := feed.WriteString("bye\n"); err != nil {
		t.Fatal(err)
	}
	feed.Close()
	if !sc.Scan() || sc.Text() != "late bye" {
		t.Fatalf("second line = %q (%v)", sc.Text(), sc.Err())
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("wait = %d, %v", code, err)
	}
	b := make([]byte, 100)
	n, _ := p.Stderr().Read(b)
	if string(b[:n]) != "line2\n" {
		t.Errorf("stderr = %q", b[:n])
	}
}

// testStartCancel: ending Start's context kills the command; Wait returns
// promptly.
func (c *suite) testStartCancel(t *testing.T) {
	sb := c.sandbox(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"echo first; sleep 30"}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sc := bufio.NewScanner(p.Stdout())
	if !sc.Scan() || sc.Text() != "first" {
		t.Fatalf("first line = %q", sc.Text())
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("first line after %s", d)
	}
	cancel()
	if _, err := p.Wait(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("cancel took %s", d)
	}
}

// testStartTimeout: a started command past its timeout is killed; Wait
// returns ErrExecTimeout.
func (c *suite) testStartTimeout(t *testing.T) {
	sb := c.sandbox(t, nil)
	start := time.Now()
	p, err := sb.Start(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(context.Background()); !errors.Is(err, sandbox.ErrExecTimeout) {
		t.Errorf("wait: err = %v, want ErrExecTimeout", err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("the timeout took %s", d)
	}
}

// testKill: Kill stops a started command, which exits as killed by
// SIGKILL (137); a second Kill is harmless.
func (c *suite) testKill(t *testing.T) {
	sb := c.sandbox(t, nil)
	p, err := sb.Start(context.Background(), sandbox.ExecRequest{Argv: []string{"echo up; exec sleep 30"}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	if sc := bufio.NewScanner(p.Stdout()); !sc.Scan() {
		t.Fatalf("no output: %v", sc.Err())
	}
	start := time.Now()
	if err := p.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	code, err := p.Wait(context.Background())
	if code != 137 || err != nil {
		t.Errorf("wait after kill = %d, %v; want 137, nil", code, err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("kill took %s", d)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("second kill: %v", err)
	}
}

// testStderrNeverBlocks: a command whose stderr nobody reads still runs to
// its end.
func (c *suite) testStderrNeverBlocks(t *testing.T) {
	sb := c.sandbox(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"head -c 3000000 /dev/zero >&2; echo done"}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(p.Stdout())
	if !sc.Scan() || sc.Text() != "done" {
		t.Fatalf("stdout = %q (%v)", sc.Text(), sc.Err())
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Errorf("wait = %d, %v", code, err)
	}
}

// testConcurrent: commands run at once in one sandbox each get their own
// environment and output.
func (c *suite) testConcurrent(t *testing.T) {
	sb := c.sandbox(t, nil)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("cmd-%d", i)
			res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep 0.2; echo $N; echo $N >&2"}, Shell: true, Env: map[string]string{"N": want}})
			switch {
			case err != nil:
				errs <- err
			case res.Stdout != want+"\n" || res.Stderr != want+"\n" || res.ExitCode != 0:
				errs <- fmt.Errorf("%s: got %d %q %q", want, res.ExitCode, res.Stdout, res.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
