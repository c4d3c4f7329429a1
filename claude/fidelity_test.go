package claude

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// These tests run every supported Claude Code version (the pinned and the
// latest, scripts/versions.sh) on the host against a scripted model, for
// what the versions do differently: cost over resumed sessions, background
// work, API errors, model failures and cut streams.

// eachVersion runs f as a parallel subtest per supported CLI version.
func eachVersion(t *testing.T, f func(t *testing.T, cli testenv.ClaudeCLI)) {
	t.Helper()
	for _, cli := range testenv.ClaudeVersions(t) {
		t.Run(cli.Version, func(t *testing.T) {
			t.Parallel()
			f(t, cli)
		})
	}
}

// run runs one turn of chat chatID with input and returns its result,
// error and events.
func runTurn(t *testing.T, e *Executor, sb *hostSandbox, srv *scripted.Server, chatID, input string, timeout time.Duration) (*executor.Result, *chattest.Recorder, error) {
	t.Helper()
	log := &chattest.Recorder{}
	req := newRequest(sb, srv, chatID, input, log)
	req.Timeout = timeout
	res, err := e.Run(context.Background(), req)
	chattest.Check(t, log.Events())
	return res, log, err
}

// TestCostPerTurn: three equal turns of a resumed session are billed
// equally; 2.1.330's total_cost_usd covers the whole session.
func TestCostPerTurn(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		u := &scripted.Usage{InputTokens: 10000, OutputTokens: 1000}
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{Text: "One.", Usage: u}, {Text: "Two.", Usage: u}, {Text: "Three.", Usage: u}}})
		t.Cleanup(srv.Close)
		e := New(Options{Binary: cli.Bin})
		var costs []float64
		for i, in := range []string{"first", "second", "third"} {
			res, log, err := runTurn(t, e, sb, srv, "chat-cost", in, time.Minute)
			if err != nil {
				t.Fatalf("turn %d: %v", i, err)
			}
			if n := len(log.Starts(chat.TypeSession)); n != 1 {
				t.Errorf("turn %d: %d session events", i, n)
			}
			if res.Usage.Turns != 1 || res.Usage.InputTokens != int64(u.InputTokens) || res.Usage.OutputTokens != int64(u.OutputTokens) {
				t.Errorf("turn %d: usage %+v", i, res.Usage)
			}
			costs = append(costs, res.Usage.CostUSD)
		}
		t.Logf("costs %v", costs)
		if costs[0] <= 0 || math.Abs(costs[1]-costs[0]) > 1e-9 || math.Abs(costs[2]-costs[0]) > 1e-9 {
			t.Errorf("equal turns billed %v", costs)
		}
	})
}

// TestBackgroundCommand: a command run in the background finishes within
// the turn, its progress shows, and the turn counts one session and every
// model turn, including the CLI's follow-up turn.
func TestBackgroundCommand(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{Text: "Starting it.", ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
				"command": "sleep 3; echo done > bg.txt", "description": "slow job", "run_in_background": true}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "It runs in the background."},
			{Text: "The background job finished."},
		}})
		t.Cleanup(srv.Close)
		start := time.Now()
		res, log, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-bg", "run the slow job", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(filepath.Join(sb.ws.Dir(), "bg.txt")); err != nil || string(b) != "done\n" {
			t.Errorf("bg.txt = %q, %v after %s", b, err, time.Since(start))
		}
		if n := len(log.Starts(chat.TypeSession)); n != 1 {
			t.Errorf("%d session events", n)
		}
		var task bool
		for _, e := range log.Starts(chat.TypeLoading) {
			task = task || e.Props["task_id"] != nil
		}
		if !task {
			t.Error("no loading message for the background task")
		}
		if res.Usage.Turns != len(srv.TurnRequests()) || !strings.Contains(res.Content, "finished") {
			t.Errorf("turns %d for %d model requests; content %q", res.Usage.Turns, len(srv.TurnRequests()), res.Content)
		}
		if slices.Contains(res.Notices, agentcli.NoticeCLIHung) || slices.Contains(res.Notices, NoticeTaskStopped) {
			t.Errorf("notices %v", res.Notices)
		}
	})
}

// TestBackgroundSubagent: a subagent run in the background is waited for;
// its result reaches the model in the same turn.
func TestBackgroundSubagent(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{Name: "Task", Input: map[string]any{"description": "count files",
				"prompt": "SUBAGENT-PROMPT: count the files", "subagent_type": "general-purpose", "run_in_background": true}}}},
			{When: &scripted.Match{Contains: "SUBAGENT-PROMPT"}, Delay: scripted.Duration(3 * time.Second), Text: "SUBAGENT-ANSWER: no files."},
			// The CLI tells the model when the task ended.
			{When: &scripted.Match{Contains: "task-notification"}, Text: "The subagent found no files."},
			{Text: "The subagent is working."},
		}})
		t.Cleanup(srv.Close)
		res, log, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-sub", "count the files", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(log.Starts(chat.TypeSession)); n != 1 {
			t.Errorf("%d session events", n)
		}
		if !strings.Contains(res.Content, "found no files") || srv.Remaining() != 0 {
			t.Errorf("content %q, %d turns left", res.Content, srv.Remaining())
		}
		for _, e := range log.Starts(chat.TypeText) {
			if strings.Contains(e.Text, "SUBAGENT-ANSWER") {
				t.Error("the subagent's text was shown as answer text")
			}
		}
	})
}

// TestBackgroundStopped: background work still running as the turn's
// timeout nears is stopped; the answer stands, a notice says so.
func TestBackgroundStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: waits for a timeout")
	}
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
				"command": "sleep 300", "description": "endless job", "run_in_background": true}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Started."},
			{Text: "Stopped."},
		}})
		t.Cleanup(srv.Close)
		start := time.Now()
		res, _, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-stop", "run it", 20*time.Second)
		if err != nil {
			t.Fatalf("err %v after %s", err, time.Since(start))
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("took %s", d)
		}
		if !slices.Contains(res.Notices, agentcli.NoticeBackgroundStopped) || !strings.Contains(res.Content, "Started.") {
			t.Errorf("notices %v, content %q", res.Notices, res.Content)
		}
	})
}

// TestAPIErrorNotText: an API error the CLI reports as a message is the
// turn's error, never answer text.
func TestAPIErrorNotText(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{Error: &scripted.HTTPError{Status: 400, Message: "prompt is too long: 300000 tokens > 200000 maximum"}}}})
		t.Cleanup(srv.Close)
		res, log, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-long", "hi", time.Minute)
		var xe *chat.Error
		if !errors.As(err, &xe) || xe.Code != chat.ErrInvalidRequest || !strings.Contains(xe.Message, "too long") {
			t.Fatalf("err %v", err)
		}
		if n := len(log.Starts(chat.TypeText)); n != 0 || res.Content != "" {
			t.Errorf("%d text messages, content %q", n, res.Content)
		}
		if n := len(log.Starts(chat.TypeError)); n != 1 {
			t.Errorf("%d error events", n)
		}
	})
}

// TestModelFailuresAtOnce: a model answering 500, or 429 with a long
// Retry-After, ends the turn with its error in seconds, not at the
// sandbox timeout.
func TestModelFailuresAtOnce(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		for _, tc := range []struct {
			name string
			err  scripted.HTTPError
			code string
		}{
			{"500", scripted.HTTPError{Status: 500}, chat.ErrUpstream},
			{"529", scripted.HTTPError{Status: 529}, chat.ErrUpstream},
			{"429", scripted.HTTPError{Status: 429, RetryAfter: 60}, chat.ErrRateLimit},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				sb := newHostSandbox(t)
				var turns []scripted.Turn
				for range 12 {
					turns = append(turns, scripted.Turn{Error: &tc.err})
				}
				srv := scripted.NewServer(&scripted.Script{Turns: turns})
				t.Cleanup(srv.Close)
				start := time.Now()
				res, log, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-fail", "hi", 5*time.Minute)
				var xe *chat.Error
				if !errors.As(err, &xe) || xe.Code != tc.code {
					t.Fatalf("err %v, want %s", err, tc.code)
				}
				if d := time.Since(start); d > 45*time.Second {
					t.Errorf("took %s", d)
				}
				if res != nil && res.Content != "" {
					t.Errorf("content %q", res.Content)
				}
				if n := len(log.Starts(chat.TypeText)); n != 0 {
					t.Errorf("%d text messages", n)
				}
				t.Logf("%s after %s, %d requests: %s", xe.Code, time.Since(start).Round(time.Millisecond), len(srv.TurnRequests()), xe.Message)
			})
		}
	})
}

// TestCutStream: an answer stream cut short and retried leaves only the
// whole answer in the turn's content.
func TestCutStream(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		const answer = "This answer arrives whole on the second try."
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
			{Text: answer, CutAfter: 5}, {Text: answer}}})
		t.Cleanup(srv.Close)
		res, log, err := runTurn(t, New(Options{Binary: cli.Bin}), sb, srv, "chat-cut", "hi", 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if res.Content != answer {
			t.Errorf("content %q", res.Content)
		}
		var c chat.Collector
		for _, e := range log.Events() {
			c.Add(e)
		}
		if shown := c.Text(); shown != answer && !slices.Contains(res.Notices, NoticeStreamCut) {
			t.Errorf("shown %q with notices %v", shown, res.Notices)
		}
	})
}

// TestWatchdog: a CLI waiting on a model that sends nothing is stopped
// after the idle timeout, not the sandbox timeout.
func TestWatchdog(t *testing.T) {
	eachVersion(t, func(t *testing.T, cli testenv.ClaudeCLI) {
		sb := newHostSandbox(t)
		srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Stall: true}}})
		t.Cleanup(srv.Close)
		start := time.Now()
		_, _, err := runTurn(t, New(Options{Binary: cli.Bin, IdleTimeout: 4 * time.Second}), sb, srv, "chat-idle", "hi", 5*time.Minute)
		var xe *chat.Error
		if !errors.As(err, &xe) || xe.Code != chat.ErrTimeout || !strings.Contains(xe.Message, "printed nothing") {
			t.Fatalf("err %v", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("took %s", d)
		}
	})
}
