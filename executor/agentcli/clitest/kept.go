package clitest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// KeptChat is a chat whose turns run in one sandbox, with one bridge
// session, each asking the executor to keep its CLI (Request.KeepAlive)
// and handing it the CLI the last turn kept, as the pipeline does for an
// assistant with sandbox.keep_alive.
type KeptChat struct {
	d    *Docker
	a    *assistant.Assistant
	id   string
	sb   sandbox.Sandbox
	conn executor.Connection
	sess *bridge.Session
	warm executor.Warm
	// History is the conversation so far, which a turn sends as the
	// pipeline does.
	History []chat.Message
	// KeepAlive is the turns' Request.KeepAlive (Keep sets it): off, each
	// turn starts a CLI that resumes the session and ends with the turn.
	KeepAlive bool
}

// Keep opens chat chatID of assistant a: its workspace, bridge session
// and sandbox, given back (the kept CLI closed first) when the test ends.
func (d *Docker) Keep(ctx context.Context, a *assistant.Assistant, chatID string) *KeptChat {
	t := d.t
	t.Helper()
	sb, sess, close := d.open(ctx, chatID)
	t.Cleanup(close)
	conn := sess.Connection()
	k := &KeptChat{d: d, a: a, id: chatID, sb: sb, conn: conn, sess: sess, KeepAlive: true}
	// Registered last: runs first.
	t.Cleanup(func() {
		if k.warm != nil {
			k.warm.Close()
		}
	})
	return k
}

// Sandbox is the chat's sandbox.
func (k *KeptChat) Sandbox() sandbox.Sandbox { return k.sb }

// Kept reports whether the last turn kept its CLI.
func (k *KeptChat) Kept() bool { return k.warm != nil && k.warm.Alive() }

// Turn runs a turn of input on the CLI the last turn kept (or a new
// one); on is called with each event as it is emitted (nil: none).
func (k *KeptChat) Turn(ctx context.Context, input string, on func(chat.Event)) (*executor.Result, *chattest.Recorder, error) {
	t := k.d.t
	t.Helper()
	req := &executor.Request{
		Assistant: k.a, UserID: "alice", ChatID: k.id,
		System:    "You are a careful coding assistant.",
		History:   append([]chat.Message{}, k.History...),
		Input:     []chat.Message{{Role: chat.RoleUser, Content: input}},
		Connector: k.conn, Sandbox: k.sb, Timeout: turnTimeout,
		WrapArgv: k.sess.WrapCommand, Relay: bridge.GuestBinary,
		KeepAlive: k.KeepAlive, Warm: k.warm, Approve: k.d.Approve, PermissionAsk: k.d.PermissionAsk,
	}
	if m := k.sess.MCPServer(); m.Command != "" {
		req.MCPServers = map[string]assistant.MCPServer{bridge.ServerName: m}
	}
	log := &chattest.Recorder{}
	var mu sync.Mutex
	req.Emit = func(e chat.Event) {
		log.Emit(e)
		if on != nil {
			mu.Lock()
			on(e)
			mu.Unlock()
		}
	}
	res, err := k.d.exec.Run(ctx, req)
	k.warm = nil
	if res != nil {
		k.warm = res.Warm
	}
	chattest.Check(t, log.Events())
	CheckNoSecret(t, RealKey, k.sb.Workspace().Dir(), log)
	if err == nil {
		k.History = append(k.History, chat.Message{Role: chat.RoleUser, Content: input}, chat.Message{Role: chat.RoleAssistant, Content: res.Content})
	}
	return res, log, err
}

// settled waits, at most 20 s, until a file of the CLI's state in the
// workspace holds text: what the CLI recorded of a turn it answered. It
// goes on after that time: a CLI may keep its state elsewhere.
func (k *KeptChat) settled(ctx context.Context, text string) {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		res, err := k.sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"grep", "-rqsF", "--", text, sandbox.Workdir + "/.agentbox"}, Timeout: time.Minute})
		if err == nil && res.ExitCode == 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Processes lists the processes in the sandbox whose command line holds
// match, each as "PID STARTTIME" (the kernel's start time in clock
// ticks): the same list before and after a turn proves the same
// processes answered it.
func (k *KeptChat) Processes(ctx context.Context, match string) []string {
	t := k.d.t
	t.Helper()
	script := `for p in /proc/[0-9]*; do pid=${p#/proc/}; [ "$pid" = "$$" ] && continue; ` +
		`c=$(tr '\0' ' ' < $p/cmdline 2>/dev/null) || continue; case "$c" in *"$1"*) ` +
		`echo "$pid $(cut -d' ' -f22 $p/stat)";; esac; done`
	res, err := k.sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"/bin/sh", "-c", script, "sh", match}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(res.Stdout), " ", ":"))
}

// Kept is the Docker scenario of a chat whose CLI is kept between turns:
// two turns answered by the same process (its pid and start time
// unchanged) in one session; a turn canceled while a command runs, which
// leaves the CLI to answer the next one; and, the CLI gone, a turn that a
// new one answers, resuming the session without showing its history.
type Kept struct {
	CLI  string
	Exec executor.Executor
	Type string
	// Process is what the kept CLI's command line holds ("--acp").
	Process string
	// Shell is the CLI's shell tool as the model calls it; Input turns a
	// command into its input.
	Shell string
	Input func(command string) map[string]any
	// ResumesUnkept: a CLI started for a chat whose kept one is gone
	// resumes the session in a turn of its own and is not kept (the
	// Gemini CLI's Agent Client Protocol cannot load a session).
	ResumesUnkept bool
}

// Run runs the scenario.
func (s Kept) Run(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts containers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*turnTimeout)
	defer cancel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{Contains: "first"}, Text: "One."},
		{When: &scripted.Match{Contains: "second"}, Text: "Two."},
		{When: &scripted.Match{Contains: "slow"}, Text: "Waiting.", ToolCalls: []scripted.ToolCall{{Name: s.Shell, Input: s.Input("sleep 100")}}},
		{When: &scripted.Match{Contains: "third"}, Text: "Three."},
		{When: &scripted.Match{Contains: "fourth"}, Text: "Four."},
	}})
	t.Cleanup(srv.Close)
	d := NewDocker(t, ctx, s.CLI, s.Exec, srv, s.Type)
	k := d.Keep(ctx, &assistant.Assistant{ID: "a"}, "chat-kept")

	res1, log1, err := k.Turn(ctx, "first", nil)
	if err != nil {
		t.Fatalf("turn 1: %v", err)
	}
	if res1.Content != "One." || res1.SessionID == "" || !k.Kept() {
		t.Fatalf("turn 1: %q session %q kept %v", res1.Content, res1.SessionID, k.Kept())
	}
	if s := log1.Starts(chat.TypeSession); len(s) != 1 {
		t.Errorf("turn 1: session events %+v", s)
	}
	before := k.Processes(ctx, s.Process)
	if len(before) == 0 {
		t.Fatalf("no process of %q in the sandbox", s.Process)
	}

	res2, log2, err := k.Turn(ctx, "second", nil)
	if err != nil {
		t.Fatalf("turn 2: %v", err)
	}
	if res2.Content != "Two." || res2.SessionID != res1.SessionID || !k.Kept() {
		t.Errorf("turn 2: %q session %q (want %q) kept %v", res2.Content, res2.SessionID, res1.SessionID, k.Kept())
	}
	if s := log2.Starts(chat.TypeSession); len(s) != 1 {
		t.Errorf("turn 2: session events %+v", s)
	}
	if res2.Usage.OutputTokens == 0 {
		t.Errorf("turn 2: usage %+v", res2.Usage)
	}
	if after := k.Processes(ctx, s.Process); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("turn 2 was answered by processes %v, turn 1 by %v", after, before)
	}
	reqs := srv.TurnRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "One.") || strings.Contains(last.LastUserText(), "conversation so far") {
		t.Errorf("turn 2's model request does not carry the session: %.300s", last.Body)
	}

	// Canceled while the command runs: the turn ends canceled, and the
	// next one is answered in the same session.
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	_, _, err = k.Turn(cctx, "slow", func(e chat.Event) {
		if e.Event == chat.Start && e.Type == chat.TypeToolCall {
			stop()
		}
	})
	if ce := (*chat.Error)(nil); !errors.As(err, &ce) || ce.Code != chat.ErrCanceled {
		t.Fatalf("canceled turn: %v, want the code %s", err, chat.ErrCanceled)
	}
	if !k.Kept() {
		t.Errorf("the CLI did not stay for the next turn after the cancel")
	}
	res3, _, err := k.Turn(ctx, "third", nil)
	if err != nil {
		t.Fatalf("turn after the cancel: %v", err)
	}
	if res3.Content != "Three." || res3.SessionID != res1.SessionID {
		t.Errorf("turn after the cancel: %q session %q, want session %q", res3.Content, res3.SessionID, res1.SessionID)
	}
	if after := k.Processes(ctx, s.Process); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the turn after the cancel was answered by processes %v, turn 1 by %v", after, before)
	}
	reqs = srv.TurnRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "Two.") {
		t.Errorf("the turn after the cancel lost the session: %.300s", last.Body)
	}

	// A CLI that is gone: a new one resumes the session, and shows
	// nothing of the turns before.
	// A CLI records a turn a moment after it answers (the Gemini CLI
	// writes its session file behind the answer): it is closed once its
	// state holds the third answer, as a CLI closed for idleness is.
	k.settled(ctx, "Three.")
	k.warm.Close()
	res4, log4, err := k.Turn(ctx, "fourth", nil)
	if err != nil {
		t.Fatalf("resumed turn: %v", err)
	}
	if res4.Content != "Four." || res4.SessionID != res1.SessionID || len(res4.ToolCalls) != 0 || k.Kept() == s.ResumesUnkept {
		t.Errorf("resumed turn: %q session %q (want %q), tool calls %+v, kept %v", res4.Content, res4.SessionID, res1.SessionID, res4.ToolCalls, k.Kept())
	}
	if n := len(log4.Starts(chat.TypeText)); n != 1 {
		t.Errorf("resumed turn: %d text messages, want 1", n)
	}
	reqs = srv.TurnRequests()
	if last := reqs[len(reqs)-1]; !strings.Contains(string(last.Body), "Three.") {
		t.Errorf("the resumed turn lost the session: %.300s", last.Body)
	}
}

// BenchKept is the benchmark of a kept chat's follow-up turn against the
// same follow-up on a CLI started for it (resuming the session), each
// from the request to the turn's first text delta, in Docker against the
// scripted model: b.N pairs, interleaved, after each chat's first turn;
// it reports both medians and their ratio.
func BenchKept(b *testing.B, cli string, exec executor.Executor, typ string) {
	ctx := context.Background()
	turns := make([]scripted.Turn, 2*b.N+8)
	for i := range turns {
		turns[i] = scripted.Turn{Text: "Done."}
	}
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	b.Cleanup(srv.Close)
	d := NewDocker(b, ctx, cli, exec, srv, typ)
	a := &assistant.Assistant{ID: "a"}
	kept, cold := d.Keep(ctx, a, "bench-kept"), d.Keep(ctx, a, "bench-cold")
	cold.KeepAlive = false
	first := func(k *KeptChat, msg string) float64 {
		start := time.Now()
		var at time.Duration
		res, _, err := k.Turn(ctx, msg, func(e chat.Event) {
			if at == 0 && e.Event == chat.Delta && e.Type == chat.TypeText {
				at = time.Since(start)
			}
		})
		if err != nil || res.Content != "Done." {
			b.Fatalf("%s: %v, answer %+v", msg, err, res)
		}
		return chat.MS(at)
	}
	first(kept, "hello")
	first(cold, "hello")
	var warm, restarted []float64
	b.ResetTimer()
	for i := range b.N {
		warm = append(warm, first(kept, fmt.Sprintf("message %d", i)))
		restarted = append(restarted, first(cold, fmt.Sprintf("message %d", i)))
		if !kept.Kept() || cold.Kept() {
			b.Fatalf("turn %d: kept %v, the other kept %v", i, kept.Kept(), cold.Kept())
		}
	}
	b.StopTimer()
	mw, mr := median(warm), median(restarted)
	b.ReportMetric(mw, "ms/kept-first-text-median")
	b.ReportMetric(mr, "ms/new-cli-first-text-median")
	b.ReportMetric(mw/mr, "ratio-kept")
}

func median(d []float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
