package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/approval"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/scripted"
)

// approvalTurn is a turn running in the background whose approval
// requests arrive on asked.
type approvalTurn struct {
	rec   chattest.Recorder
	asked chan chat.Event
	done  chan error
	resp  *Response
}

func startApprovalTurn(ctx context.Context, p *Pipeline, chatID, msg string) *approvalTurn {
	at := &approvalTurn{asked: make(chan chat.Event, 8), done: make(chan error, 1)}
	emit := func(e chat.Event) {
		at.rec.Emit(e)
		if e.Type == TypeApprovalRequested && e.Event == chat.Start {
			at.asked <- e
		}
	}
	go func() {
		resp, err := p.Chat(ctx, &Request{UserID: "alice", ChatID: chatID, AssistantID: "coder", Messages: user(msg)}, emit)
		at.resp = resp
		at.done <- err
	}()
	return at
}

// next waits for the turn's next approval request.
func (at *approvalTurn) next(t *testing.T, ctx context.Context) chat.Event {
	t.Helper()
	select {
	case e := <-at.asked:
		return e
	case err := <-at.done:
		t.Fatalf("the turn ended without asking: %v (events %+v)", err, at.rec.Events())
	case <-ctx.Done():
		t.Fatal("no approval request before the test's deadline")
	}
	return chat.Event{}
}

func (at *approvalTurn) wait(t *testing.T) string {
	t.Helper()
	if err := <-at.done; err != nil {
		t.Fatalf("turn: %v (events %+v)", err, at.rec.Events())
	}
	return at.resp.Content
}

// resolved returns the props of the turn's approval_resolved events.
func (at *approvalTurn) resolved() []map[string]any {
	var out []map[string]any
	for _, e := range at.rec.Events() {
		if e.Type == TypeApprovalResolved && e.Event == chat.Start {
			out = append(out, e.Props)
		}
	}
	return out
}

// TestApprovalClaudeInDocker: the real Claude Code CLI in Docker asks the
// bridge's prompt tool before its tools, on a kept chat's warm CLI too:
// a Bash call asked and allowed runs (another user's answer and a second
// answer refused); a Write denied never runs and the model reads the
// user's reason; a call nobody answers is denied when the policy's time
// is up; a call listed by Approvals (as a client that reconnected sees
// it) is answered there; "remember" allows the rule for the chat.
func TestApprovalClaudeInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	// Each turn of the script answers once: a Bash call and its answer
	// for each of the four turns that run one, a Write and its answer.
	bash := func(msg, cmd string) []scripted.Turn {
		return []scripted.Turn{
			{When: &scripted.Match{Contains: msg}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": cmd}}}},
			{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Bash answered."},
		}
	}
	e := newKeptEnv(t, ctx, time.Minute, slices.Concat(
		bash("run it", "touch /workspace/ran.txt && echo ran-7731"),
		[]scripted.Turn{
			{When: &scripted.Match{Contains: "write it"}, ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/workspace/notes.txt", "content": "first line\nsecond line\n"}}}},
			{When: &scripted.Match{AfterToolResult: "Write"}, Text: "Write answered."},
		},
		bash("slow one", "touch /workspace/slow.txt && echo slow-5512"),
		bash("slow two", "touch /workspace/slow.txt && echo slow-5512"),
		bash("run again", "touch /workspace/ran.txt && echo ran-7731"),
	), nil)
	pol, probs := approval.Parse(approval.Raw{Ask: []string{"Bash(touch:*)", "Write(*.txt)"}, Timeout: "20s"}, time.ParseDuration)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	e.coder.Approval = pol

	// Asked, another user's and a second answer refused, allowed, run.
	at := startApprovalTurn(ctx, e.p, "c1", "run it")
	ev := at.next(t, ctx)
	id, _ := ev.Props["approval_id"].(string)
	if ev.Props["tool"] != "Bash" || ev.Props["rule"] != "Bash(touch:*)" || !strings.Contains(fmt.Sprintf("%s", ev.Props["input"]), "ran-7731") {
		t.Fatalf("approval_requested props %v", ev.Props)
	}
	if err := e.p.Approve(ctx, "bob", "c1", id, false, approval.Answer{Decision: approval.Allow}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("bob's answer: %v, want not found", err)
	}
	if err := e.p.Approve(ctx, "alice", "c1", id, false, approval.Answer{Decision: approval.Allow}); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Approve(ctx, "alice", "c1", id, false, approval.Answer{Decision: approval.Deny}); !errors.Is(err, approval.ErrAnswered) {
		t.Fatalf("second answer: %v, want already answered", err)
	}
	if got := at.wait(t); got != "Bash answered." {
		t.Fatalf("answer %q", got)
	}
	if out := toolOutput(at.rec.Events(), "Bash"); !strings.Contains(out, "ran-7731") {
		t.Errorf("allowed Bash did not run: result %q", out)
	}
	if r := at.resolved(); len(r) != 1 || r[0]["decision"] != "allow" || r[0]["by"] != "user" {
		t.Errorf("approval_resolved %v", r)
	}

	// A Write denied with a reason: it never runs, the model reads why.
	at = startApprovalTurn(ctx, e.p, "c1", "write it")
	ev = at.next(t, ctx)
	if d, _ := ev.Props["diff"].(string); !strings.Contains(d, "+first line\n+second line\n") {
		t.Errorf("Write's diff %q", d)
	}
	if err := e.p.Approve(ctx, "alice", "c1", ev.Props["approval_id"].(string), false, approval.Answer{Decision: approval.Deny, Reason: "keep-notes-untouched-4471"}); err != nil {
		t.Fatal(err)
	}
	if got := at.wait(t); got != "Write answered." {
		t.Fatalf("answer %q", got)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "keep-notes-untouched-4471") {
		t.Errorf("the model was not told the reason: %.600s", last)
	}
	if dir, err := e.ws.Path("alice", "c1"); err != nil {
		t.Fatal(err)
	} else if _, err := os.Stat(filepath.Join(dir, "notes.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the denied Write wrote notes.txt (%v)", err)
	}

	// Nobody answers: denied when the policy's time is up.
	pol.Timeout = 3 * time.Second
	at = startApprovalTurn(ctx, e.p, "c1", "slow one")
	at.next(t, ctx)
	if got := at.wait(t); got != "Bash answered." {
		t.Fatalf("answer %q", got)
	}
	if last := lastRequest(e.srv); !strings.Contains(last, "nobody answered") {
		t.Errorf("the model was not told of the timeout: %.600s", last)
	}
	if r := at.resolved(); len(r) != 1 || r[0]["decision"] != "deny" || r[0]["by"] != "timeout" {
		t.Errorf("approval_resolved %v", r)
	}
	pol.Timeout = 20 * time.Second

	// Answered from the list (a client that reconnected), remembered: the
	// same rule is not asked again in this chat.
	at = startApprovalTurn(ctx, e.p, "c1", "slow two")
	at.next(t, ctx)
	list := e.p.Approvals("alice", "c1", false)
	if len(list) != 1 || list[0].Tool != "Bash" || len(e.p.Approvals("bob", "c1", false)) != 0 {
		t.Fatalf("pending approvals %+v", list)
	}
	if err := e.p.Approve(ctx, "alice", "c1", list[0].ID, false, approval.Answer{Decision: approval.Allow, Remember: true}); err != nil {
		t.Fatal(err)
	}
	at.wait(t)
	if out := toolOutput(at.rec.Events(), "Bash"); !strings.Contains(out, "slow-5512") {
		t.Errorf("allowed Bash did not run: result %q", out)
	}
	at = startApprovalTurn(ctx, e.p, "c1", "run again")
	at.wait(t)
	if r := at.resolved(); len(r) != 0 || len(at.asked) != 0 {
		t.Errorf("a remembered rule was asked again: %v", r)
	}
}

// toolOutput is the content of the turn's last result of tool.
func toolOutput(events []chat.Event, tool string) string {
	out := ""
	for _, ev := range events {
		if ev.Type == chat.TypeToolResult && ev.Event == chat.Start && ev.Result != nil && (ev.Result.Name == tool || ev.Result.Name == "") {
			out = ev.Result.Content
		}
	}
	return out
}
