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
	if d := time.Since(start); d > 3*time.Second {
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
	script := fmt.Sprintf("echo started; (sleep 1; touch %s/%s) & sleep %s & sleep %s", sandbox.Workdir, trace, marker, marker)
	start := time.Now()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{script}, Shell: true, Timeout: 500 * time.Millisecond})
	if !errors.Is(err, sandbox.ErrExecTimeout) {
		t.Fatalf("err = %v, want ErrExecTimeout", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	if res == nil || res.Stdout != "started\n" {
		t.Errorf("partial result = %+v, want stdout %q", res, "started\n")
	}
	c.checkNothingLeft(t, sb, marker, trace)
}

// checkNothingLeft waits for the processes holding marker to be gone from
// the host (bounded), checks that the sandbox lists none (when it is
// still there), and that the background trace never appears.
func (c *suite) checkNothingLeft(t *testing.T, sb sandbox.Sandbox, marker, trace string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(hostProcesses(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := hostProcesses(marker); len(left) > 0 {
		t.Errorf("processes left behind on the host: %v", left)
	}
	if ps, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"ps", "-eo", "args"}}); err == nil && strings.Contains(ps.Stdout, marker) {
		t.Errorf("processes left behind in the sandbox:\n%s", ps.Stdout)
	}
	time.Sleep(1500 * time.Millisecond) // the trace is written one second in
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
	ctx := context.Background()
	p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"read x; echo got $x; echo line2 >&2; sleep 2; echo late"}, Shell: true, Stdin: strings.NewReader("hello\n")})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sc := bufio.NewScanner(p.Stdout())
	if !sc.Scan() || sc.Text() != "got hello" {
		t.Fatalf("first line = %q (%v)", sc.Text(), sc.Err())
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("first line arrived after %s: not streamed", d)
	}
	if !sc.Scan() || sc.Text() != "late" {
		t.Fatalf("second line = %q", sc.Text())
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
	if d := time.Since(start); d > time.Second {
		t.Errorf("first line after %s", d)
	}
	cancel()
	if _, err := p.Wait(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
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
	if d := time.Since(start); d > 3*time.Second {
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
	if d := time.Since(start); d > 2*time.Second {
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
