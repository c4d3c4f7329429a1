package agentcli_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

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
	exit := run.Wait(func(l agentcli.Line) {
		if string(l.Bytes) == "RESULT" {
			got = true
			run.ResultSeen()
			run.ResultSeen() // more than once is fine
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
		notices  []string
	}{
		{name: "result, exit 0", s: script{stdout: "RESULT\n"}},
		{name: "lingers after its result", s: script{stdout: "RESULT\n", hang: true}, killed: true, notices: []string{agentcli.NoticeCLIHung}},
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
				if !slices.Equal(exit.Notices, tc.notices) || len(log.Starts(chat.TypeNotice)) != len(tc.notices) || len(log.Events()) != 2*len(tc.notices) {
					t.Errorf("notices %v, events %+v", exit.Notices, log.Events())
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
	exit := run.Wait(func(agentcli.Line) {})
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

// monitored runs a fake CLI whose output lines steer the run through its
// Monitor: ANSWER (Answered; the result counts), BUSY and FREE (Busy),
// SETTLED and UNSETTLED (Settled), STOP (Stop, with a parser error).
func monitored(t *testing.T, h sandboxtest.HandlerFunc, spec agentcli.Spec) (*agentcli.Exit, *chat.Error, *chattest.Recorder) {
	t.Helper()
	log := &chattest.Recorder{}
	spec.CLI, spec.ErrorID, spec.Emit, spec.Exec = "fake-cli", "fk-error", log.Emit, fakeExec
	spec.Sandbox = sandboxtest.New(t, sandboxtest.Config{Handler: h})
	if spec.GracePeriod == 0 {
		spec.GracePeriod = 50 * time.Millisecond
	}
	run, xe := agentcli.Start(context.Background(), spec)
	if xe != nil {
		t.Fatal(xe)
	}
	var p agentcli.Parsed
	exit := run.Wait(func(l agentcli.Line) { steer(run, string(l.Bytes), &p) })
	return exit, exit.Failure(p), log
}

// steer tells m what a line of a fake CLI says (see monitored).
func steer(m agentcli.Monitor, line string, p *agentcli.Parsed) {
	switch line {
	case "ANSWER":
		p.GotResult = true
		m.Answered()
	case "BUSY", "FREE":
		m.Busy(line == "BUSY")
	case "SETTLED", "UNSETTLED":
		m.Settled(line == "SETTLED")
	case "STOP":
		p.Err = &chat.Error{Code: chat.ErrRateLimit, Message: "the model is rate limited"}
		m.Stop()
	}
}

// TestRunHoldsInput: the input stays open until the CLI's work is done,
// then ends so the CLI exits on its own.
func TestRunHoldsInput(t *testing.T) {
	t.Parallel()
	exit, xe, log := monitored(t, func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
		in := bufio.NewReader(cmd.Stdin)
		if l, err := in.ReadString('\n'); err != nil || l != "prompt\n" {
			return 3, nil
		}
		io.WriteString(cmd.Stdout, "ANSWER\nBUSY\nUNSETTLED\n")
		got := make(chan error, 1)
		go func() { _, err := in.ReadByte(); got <- err }()
		select {
		case <-got:
			return 4, nil // the input ended while work ran
		case <-time.After(200 * time.Millisecond):
		}
		io.WriteString(cmd.Stdout, "FREE\nSETTLED\n")
		select {
		case err := <-got:
			if errors.Is(err, io.EOF) {
				return 0, nil
			}
			return 5, nil
		case <-ctx.Done():
			return -1, nil
		}
	}, agentcli.Spec{Input: []byte("prompt\n"), HoldInput: true, GracePeriod: 5 * time.Second})
	if xe != nil || exit.Code != 0 || exit.Killed || len(log.Events()) != 0 {
		t.Errorf("err %v, exit %+v, events %+v", xe, exit, log.Events())
	}
}

// TestRunWatchdog: a CLI silent for the idle timeout while not busy is
// stopped: a failure before its answer, a notice after it; a busy one is
// left to its timeout.
func TestRunWatchdog(t *testing.T) {
	t.Parallel()
	hang := func(out string) sandboxtest.HandlerFunc {
		return func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
			io.WriteString(cmd.Stdout, out)
			<-ctx.Done()
			return -1, nil
		}
	}
	// The timeout is far off: the watchdog's message and Exit.Idle tell
	// its stop from the timeout's, however slow the host.
	spec := agentcli.Spec{IdleTimeout: 150 * time.Millisecond, Timeout: time.Minute}
	exit, xe, _ := monitored(t, hang("starting\n"), spec)
	if xe == nil || xe.Code != chat.ErrTimeout || !strings.Contains(xe.Message, "printed nothing for") || !exit.Idle {
		t.Errorf("silent before its answer: %v, %+v", xe, exit)
	}
	exit, xe, log := monitored(t, hang("ANSWER\nUNSETTLED\n"), spec)
	if xe != nil || !exit.Idle || !slices.Equal(exit.Notices, []string{agentcli.NoticeCLIHung}) || len(log.Starts(chat.TypeNotice)) != 1 {
		t.Errorf("silent after its answer: %v, %+v", xe, exit)
	}
	exit, xe, _ = monitored(t, hang("BUSY\n"), agentcli.Spec{IdleTimeout: 100 * time.Millisecond, Timeout: 500 * time.Millisecond})
	if xe == nil || xe.Code != chat.ErrTimeout || !strings.Contains(xe.Message, "sandbox timeout") || exit.Idle {
		t.Errorf("busy: %v, %+v", xe, exit)
	}
}

// TestRunStopsBackgroundWork: work still running after the answer is
// stopped as the timeout nears, with a notice; the turn succeeds.
func TestRunStopsBackgroundWork(t *testing.T) {
	t.Parallel()
	closed := make(chan bool, 1)
	exit, xe, log := monitored(t, func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
		io.WriteString(cmd.Stdout, "ANSWER\nBUSY\nUNSETTLED\n")
		go func() { _, err := io.ReadAll(cmd.Stdin); closed <- err == nil }()
		<-ctx.Done()
		return -1, nil
	}, agentcli.Spec{Input: []byte("go\n"), HoldInput: true, Timeout: time.Second, GracePeriod: 5 * time.Second})
	if xe != nil || !exit.Killed || !slices.Equal(exit.Notices, []string{agentcli.NoticeBackgroundStopped}) {
		t.Errorf("err %v, exit %+v", xe, exit)
	}
	if n := log.Starts(chat.TypeNotice); len(n) != 1 || n[0].Props["code"] != agentcli.NoticeBackgroundStopped {
		t.Errorf("notices %+v", n)
	}
	select {
	case ok := <-closed:
		if !ok {
			t.Error("input not ended cleanly")
		}
	case <-time.After(30 * time.Second):
		t.Error("input never ended")
	}
}

// TestRunStop: the parser stops the CLI at once; its error is the run's.
func TestRunStop(t *testing.T) {
	t.Parallel()
	// The timeout would end it with ErrTimeout: the parser's error shows
	// the stop was the parser's.
	exit, xe, _ := monitored(t, func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
		io.WriteString(cmd.Stdout, "STOP\n")
		<-ctx.Done()
		return -1, nil
	}, agentcli.Spec{Timeout: time.Minute})
	if xe == nil || xe.Code != chat.ErrRateLimit || !exit.Killed {
		t.Errorf("err %v, exit %+v", xe, exit)
	}
}

// TestRunSendAndCancel: a kept CLI that speaks a protocol gets what its
// parser sends (Sender) after its input, in order; a turn canceled while
// it works asks it to stop (the canceler) and, settled, it stays up for
// the next turn; one that does not settle is stopped after the grace
// period.
func TestRunSendAndCancel(t *testing.T) {
	t.Parallel()
	for _, settles := range []bool{true, false} {
		h := func(ctx context.Context, cmd *sandboxtest.Cmd) (int, error) {
			in := bufio.NewReader(cmd.Stdin)
			for _, want := range []string{"PROMPT\n", "PONG 1\n", "PONG 2\n"} {
				if l, err := in.ReadString('\n'); err != nil || l != want {
					return 3, nil
				}
				io.WriteString(cmd.Stdout, "PING\n")
			}
			io.WriteString(cmd.Stdout, "BUSY\nWORKING\n")
			if l, err := in.ReadString('\n'); err != nil || l != "CANCEL\n" {
				return 4, nil
			}
			if settles {
				io.WriteString(cmd.Stdout, "SETTLED\n")
			}
			// The next turn's message, or the input's end at Close.
			_, err := in.ReadString('\n')
			if errors.Is(err, io.EOF) {
				return 0, nil
			}
			<-ctx.Done()
			return -1, nil
		}
		ctx, cancel := context.WithCancel(context.Background())
		log := &chattest.Recorder{}
		run, xe := agentcli.Start(ctx, agentcli.Spec{CLI: "fake-cli", ErrorID: "fk-error", Emit: log.Emit, Exec: fakeExec,
			Sandbox: sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.HandlerFunc(h)}),
			Input:   []byte("PROMPT\n"), Keep: true, GracePeriod: time.Second})
		if xe != nil {
			t.Fatal(xe)
		}
		asked := 0
		run.SetCanceler(func() bool {
			asked++
			return run.Send([]byte("CANCEL\n")) == nil
		})
		pings := 0
		var p agentcli.Parsed
		exit := run.Wait(func(l agentcli.Line) {
			switch string(l.Bytes) {
			case "PING":
				pings++
				if pings < 3 {
					if err := run.Send([]byte(fmt.Sprintf("PONG %d\n", pings))); err != nil {
						t.Error(err)
					}
				}
			case "WORKING":
				cancel()
			default:
				steer(run, string(l.Bytes), &p)
			}
		})
		xerr := exit.Failure(p)
		if asked != 1 || xerr == nil || xerr.Code != chat.ErrCanceled || exit.Alive != settles || run.Alive() != settles {
			t.Errorf("settles %v: canceler asked %d times, error %v, exit alive %v, run alive %v", settles, asked, xerr, exit.Alive, run.Alive())
		}
		run.Close()
		if run.Alive() {
			t.Error("alive after Close")
		}
	}
}
