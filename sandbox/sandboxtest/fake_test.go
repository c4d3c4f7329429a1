package sandboxtest_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestReply(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Reply{Stdout: "out", Stderr: "err", ExitCode: 3}})
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"anything"}, Dir: "sub"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "out" || res.Stderr != "err" || res.ExitCode != 3 || res.Cwd != "sub" || res.Truncated {
		t.Errorf("result %+v", res)
	}
	if st, err := sb.Workspace().Stat(context.Background(), "sub"); err != nil || !st.IsDir {
		t.Errorf("working directory not made: %v", err)
	}
	calls := sb.Calls()
	if len(calls) != 1 || calls[0].Start || calls[0].Req.Argv[0] != "anything" {
		t.Errorf("calls %+v", calls)
	}

	lost := errors.New("container gone")
	sb = sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Reply{Stdout: "partial", Err: lost}})
	if res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"x"}}); !errors.Is(err, lost) || res.Stdout != "partial" {
		t.Errorf("failing reply: %+v, %v", res, err)
	}
}

func TestOutputCap(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Reply{Stdout: "partial output"}, MaxOutput: 7})
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"x"}})
	if err != nil || res.Stdout != "partial" || !res.Truncated {
		t.Errorf("sandbox cap: %+v, %v", res, err)
	}
	res, err = sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"x"}, MaxOutput: 100})
	if err != nil || res.Stdout != "partial output" || res.Truncated {
		t.Errorf("request cap: %+v, %v", res, err)
	}
}

func TestChecksRequests(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Echo})
	for _, req := range []sandbox.ExecRequest{{}, {Argv: []string{"a", "b"}, Shell: true}, {Argv: []string{"pwd"}, Dir: "../x"}} {
		if _, err := sb.Exec(context.Background(), req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
	if len(sb.Calls()) != 3 {
		t.Errorf("calls %d, want the 3 made", len(sb.Calls()))
	}
	noWS := sandboxtest.NewSandbox(sandboxtest.Config{Handler: sandboxtest.Echo})
	if _, err := noWS.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}}); err == nil || noWS.Workspace() != nil {
		t.Errorf("no workspace: %v", err)
	}
	none := sandboxtest.New(t, sandboxtest.Config{})
	if _, err := none.Start(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandboxtest.ErrNoHandler) {
		t.Errorf("no handler: %v", err)
	}
	refused := errors.New("no such image")
	sb = sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Echo, StartErr: refused})
	if _, err := sb.Start(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, refused) {
		t.Errorf("start error: %v", err)
	}
}

func TestEcho(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Echo})
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"git", "status"}})
	if err != nil || res.Stdout != "git status\n" || res.ExitCode != 0 {
		t.Errorf("%+v, %v", res, err)
	}
}

// TestKillTimeoutCancel: a hanging command ends as the contracts say.
func TestKillTimeoutCancel(t *testing.T) {
	t.Parallel()
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: sandboxtest.Reply{Stdout: "up\n", Hang: true}})
	hang := sandbox.ExecRequest{Argv: []string{"sleep"}}
	ctx := context.Background()

	p, err := sb.Start(ctx, hang)
	if err != nil {
		t.Fatal(err)
	}
	if l, _ := bufio.NewReader(p.Stdout()).ReadString('\n'); l != "up\n" {
		t.Errorf("stdout %q", l)
	}
	_ = p.Kill()
	if code, err := p.Wait(ctx); code != 137 || err != nil {
		t.Errorf("after kill: %d, %v", code, err)
	}

	timed := hang
	timed.Timeout = 20 * time.Millisecond
	if _, err := sb.Exec(ctx, timed); !errors.Is(err, sandbox.ErrExecTimeout) {
		t.Errorf("timeout: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := sb.Exec(cctx, hang); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}

	p, err = sb.Start(ctx, hang)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx); err != nil || !sb.Removed() {
		t.Fatalf("remove: %v", err)
	}
	if code, err := p.Wait(ctx); code != 137 || err != nil {
		t.Errorf("after remove: %d, %v", code, err)
	}
	if _, err := sb.Exec(ctx, hang); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("exec after remove: %v", err)
	}
}

func TestHost(t *testing.T) {
	t.Parallel()
	var tee strings.Builder
	h := &sandboxtest.Host{Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=/workspace/home"}, Tee: &tee}
	sb := sandboxtest.New(t, sandboxtest.Config{Handler: h, Env: map[string]string{"FROM_SPEC": "spec"}})
	ws := sb.Workspace().Dir()
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{
		Argv: []string{`pwd; echo $HOME $FROM_SPEC $REQ; cat; echo /workspace/x; echo oops >&2; exit 4`}, Shell: true,
		Dir: "d", Env: map[string]string{"REQ": "req"}, Stdin: strings.NewReader("in\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	// The script is argv: its /workspace paths are the host folder's too.
	want := filepath.Join(ws, "d") + "\n" + ws + "/home spec req\nin\n" + ws + "/x\n"
	if res.Stdout != want || res.Stderr != "oops\n" || res.ExitCode != 4 || tee.String() != want {
		t.Errorf("got %+v (tee %q), want stdout %q", res, tee.String(), want)
	}
	res, err = sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"no-such-program-x"}})
	if err != nil || res.ExitCode != 127 || !strings.Contains(res.Stderr, "no-such-program-x") {
		t.Errorf("missing program: %+v, %v", res, err)
	}
	start := time.Now()
	res, err = sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep 30 & sleep 30"}, Shell: true, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, sandbox.ErrExecTimeout) || time.Since(start) > 5*time.Second {
		t.Errorf("timeout: %+v, %v after %s", res, err, time.Since(start))
	}
}

func TestRuntime(t *testing.T) {
	t.Parallel()
	rt := &sandboxtest.Runtime{Handler: sandboxtest.Echo}
	ws := sandboxtest.TempWorkspace(t)
	ctx := context.Background()
	if _, err := rt.Create(ctx, sandbox.Spec{UserID: "../x", ChatID: "c", Workspace: ws}); err == nil {
		t.Error("bad user id: no error")
	}
	sb, err := rt.Create(ctx, sandbox.Spec{UserID: "u", ChatID: "c", Workspace: ws, Env: map[string]string{"A": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if rt.Created() != 1 || rt.Live() != 1 || sb.Workspace() != ws || rt.Specs()[0].Env["A"] != "1" {
		t.Errorf("created %d live %d", rt.Created(), rt.Live())
	}
	_ = sb.Remove(ctx)
	_ = sb.Remove(ctx)
	if rt.Live() != 0 || !rt.Sandboxes()[0].Removed() {
		t.Errorf("live %d after remove", rt.Live())
	}
	rt.CreateErr = errors.New("engine is down")
	if _, err := rt.Create(ctx, sandbox.Spec{UserID: "u", ChatID: "c", Workspace: ws}); err == nil || !strings.Contains(err.Error(), "engine is down") {
		t.Errorf("create error: %v", err)
	}
}
