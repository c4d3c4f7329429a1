package agentcli_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

// TestMain fails the package when a run leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// script is what the fake process does: print stdout and stderr, then
// exit with code (or waitErr), or hang until it is killed.
type script struct {
	stdout, stderr string
	code           int
	waitErr        error
	hang           bool
	startErr       error
}

// fakeExec is the command the tests start.
var fakeExec = sandbox.ExecRequest{Argv: []string{"fake-cli"}}

// sandbox is a fake sandbox whose commands play s.
func (s script) sandbox(t *testing.T) *sandboxtest.Sandbox {
	return sandboxtest.New(t, sandboxtest.Config{StartErr: s.startErr, Handler: sandboxtest.Reply{
		Stdout: s.stdout, Stderr: s.stderr, ExitCode: s.code, Err: s.waitErr, Hang: s.hang}})
}

// runScript runs s through Start, Wait and Failure with a parser that
// takes a "RESULT" line as the CLI's result.
func runScript(t *testing.T, ctx context.Context, s script, timeout time.Duration, noResult func(string) (string, string)) (*agentcli.Exit, *chat.Error, *chattest.Recorder) {
	t.Helper()
	log := &chattest.Recorder{}
	run, xe := agentcli.Start(ctx, agentcli.Spec{
		CLI: "fake-cli", ErrorID: "fk-error", Emit: log.Emit, Sandbox: s.sandbox(t), Exec: fakeExec,
		Timeout: timeout, GracePeriod: 50 * time.Millisecond, Secrets: []string{"sk-SECRET"},
	})
	if xe != nil {
		return nil, xe, log
	}
	got := false
	exit := run.Wait(func(r io.Reader) error {
		lr := agentcli.NewLineReader(r)
		for {
			l, err := lr.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if string(l) == "RESULT" {
				got = true
				run.ResultSeen()
				run.ResultSeen() // more than once is fine
			}
		}
	})
	return exit, exit.Failure(agentcli.Parsed{GotResult: got, NoResult: noResult}), log
}

func TestRunFailures(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		s        script
		timeout  time.Duration
		noResult func(string) (string, string)
		code     string // "" for success
		msg      string
		killed   bool
	}{
		{name: "result, exit 0", s: script{stdout: "RESULT\n"}},
		{name: "lingers after its result", s: script{stdout: "RESULT\n", hang: true}, killed: true},
		{name: "no result", s: script{stdout: "noise\n", stderr: "warming up\nboom: no key sk-SECRET\n", code: 3},
			code: chat.ErrExecutor, msg: "fake-cli exited with code 3 without a result: boom: no key [redacted]"},
		{name: "no result, classified", s: script{stderr: "rate limited", code: 1},
			noResult: func(tail string) (string, string) { return chat.ErrRateLimit, "upstream said " + tail },
			code:     chat.ErrRateLimit, msg: "without a result; upstream said rate limited: rate limited"},
		{name: "exit after result", s: script{stdout: "RESULT\n", stderr: "crashed late", code: 2},
			code: chat.ErrExecutor, msg: "fake-cli exited with code 2 after its result: crashed late"},
		{name: "sandbox timeout", s: script{hang: true}, timeout: 50 * time.Millisecond,
			code: chat.ErrTimeout, msg: "fake-cli ran longer than the sandbox timeout (50ms) and was stopped"},
		{name: "exec timeout", s: script{waitErr: sandbox.ErrExecTimeout}, timeout: time.Minute,
			code: chat.ErrTimeout, msg: "fake-cli ran longer than its timeout (1m0s) and was stopped"},
		{name: "lost sandbox", s: script{waitErr: errors.New("container gone")},
			code: chat.ErrSandbox, msg: "fake-cli: container gone"},
		{name: "cannot start", s: script{startErr: errors.New("no such image")},
			code: chat.ErrSandbox, msg: "start fake-cli: no such image"},
		{name: "canceled before start", ctx: canceled, s: script{startErr: context.Canceled},
			code: chat.ErrCanceled, msg: "the request was canceled; fake-cli was stopped"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			exit, xe, log := runScript(t, ctx, tc.s, tc.timeout, tc.noResult)
			if tc.code == "" {
				if xe != nil {
					t.Fatalf("err %v", xe)
				}
				if exit.Killed != tc.killed {
					t.Errorf("killed %v", exit.Killed)
				}
				if n := len(log.Events()); n != 0 {
					t.Errorf("%d events", n)
				}
				return
			}
			if xe == nil || xe.Code != tc.code || !strings.Contains(xe.Message, tc.msg) {
				t.Fatalf("err %v, want %s containing %q", xe, tc.code, tc.msg)
			}
			if strings.Contains(xe.Error(), "sk-SECRET") {
				t.Errorf("secret in %v", xe)
			}
			// Failure emits its error; a start failure is the caller's to
			// report.
			want := 1
			if exit == nil {
				want = 0
			}
			if ev := log.Starts(chat.TypeError); len(ev) != want || (want == 1 && (ev[0].ID != "fk-error" || ev[0].Props["code"] != tc.code)) {
				t.Errorf("error events %+v", ev)
			}
		})
	}
}

// TestRunReportedFailure: a failure the CLI reported keeps its code and
// gets the stderr tail; its event was the parser's, so none is added.
func TestRunReportedFailure(t *testing.T) {
	t.Parallel()
	log := &chattest.Recorder{}
	run, xe := agentcli.Start(context.Background(), agentcli.Spec{CLI: "fake-cli", Emit: log.Emit,
		Sandbox: script{stdout: "RESULT\n", stderr: "details", code: 1}.sandbox(t), Exec: fakeExec})
	if xe != nil {
		t.Fatal(xe)
	}
	exit := run.Wait(func(r io.Reader) error { _, err := io.Copy(io.Discard, r); return err })
	if exit.Stderr != "details" || exit.Code != 1 || exit.Started.IsZero() {
		t.Errorf("exit %+v", exit)
	}
	reported := &chat.Error{Code: chat.ErrMaxTurns, Message: "too many turns"}
	var stderr *executor.Stderr
	if got := exit.Failure(agentcli.Parsed{GotResult: true, Err: reported}); got != reported || !errors.As(got, &stderr) || stderr.Tail != "details" {
		t.Errorf("err %+v", got)
	}
	if n := len(log.Events()); n != 0 {
		t.Errorf("%d events", n)
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	got := agentcli.Secrets("sk-key", map[string]string{"A": "tok-1", "B": "no", "C": ""})
	if len(got) != 2 || got[0] != "sk-key" || got[1] != "tok-1" {
		t.Errorf("secrets %q", got)
	}
	if got := agentcli.Secrets("abc", nil); got != nil {
		t.Errorf("short key kept: %q", got)
	}
}

func TestTurn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  *executor.Request
		msg  string // "" when the request passes
	}{
		{"no sandbox", &executor.Request{Assistant: &assistant.Assistant{ID: "a"}}, "x executor: request has no sandbox"},
		{"no workspace", &executor.Request{Assistant: &assistant.Assistant{ID: "a"}, Sandbox: sandboxtest.NewSandbox(sandboxtest.Config{})}, "x executor: request has no sandbox"},
	}
	for _, tc := range tests {
		log := &chattest.Recorder{}
		turn := agentcli.NewTurn(log.Emit, "x-error")
		err := turn.Check(tc.req, "x executor")
		var xe *chat.Error
		if !errors.As(err, &xe) || xe.Code != chat.ErrInternal || xe.Message != tc.msg {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if ev := log.Starts(chat.TypeError); len(ev) != 1 || ev[0].ID != "x-error" || ev[0].Text != tc.msg {
			t.Errorf("%s: events %+v", tc.name, ev)
		}
		turn.End()
		turn.Emit(chat.Event{Event: chat.Delta})
		if res, err := turn.Fail(chat.ErrSandbox, "late", nil); res != nil || err == nil || len(log.Events()) != 2 { // the error message: start and end
			t.Errorf("%s: after End: %v, %d events", tc.name, err, len(log.Events()))
		}
	}
}
