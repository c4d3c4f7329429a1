package approval

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	p, probs := Parse(Raw{
		Deny:  []string{"Edit(secrets/**)", "WebFetch(domain:evil.example)", "mcp__github__delete_repo"},
		Ask:   []string{"Bash(git push:*)", "Edit(src/**)", "mcp__github", "Write"},
		Allow: []string{"Bash(npm test)", "*"},
	}, time.ParseDuration)
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for _, tt := range []struct {
		tool, input string
		want        Verdict
		rule        string
	}{
		{"Bash", `{"command":"git push origin main"}`, Ask, "Bash(git push:*)"},
		{"Bash", `{"command":"git push"}`, Ask, "Bash(git push:*)"},
		{"Bash", `{"command":"git pushy"}`, Allow, "*"},
		{"Bash", `{"command":"npm test"}`, Allow, "Bash(npm test)"},
		{"Edit", `{"file_path":"/workspace/src/a/b.go"}`, Ask, "Edit(src/**)"},
		{"Edit", `{"file_path":"/workspace/secrets/k"}`, Deny, "Edit(secrets/**)"},
		{"Edit", `{"file_path":"/workspace/README.md"}`, Allow, "*"},
		{"Write", `{"file_path":"/workspace/x","content":"y"}`, Ask, "Write"},
		{"WebFetch", `{"url":"https://api.evil.example/x"}`, Deny, "WebFetch(domain:evil.example)"},
		{"WebFetch", `{"url":"https://notevil.example/x"}`, Allow, "*"},
		{"mcp__github__delete_repo", `{}`, Deny, "mcp__github__delete_repo"},
		{"mcp__github__create_issue", `{}`, Ask, "mcp__github"},
		{"mcp__githubx__a", `{}`, Allow, "*"},
	} {
		v, rule := p.Decide(tt.tool, json.RawMessage(tt.input), "/workspace")
		if v != tt.want || rule != tt.rule {
			t.Errorf("%s %s: got %s by %q, want %s by %q", tt.tool, tt.input, v, rule, tt.want, tt.rule)
		}
	}
	if v, _ := (*Policy)(nil).Decide("Bash", nil, ""); v != Allow {
		t.Errorf("nil policy: %s", v)
	}
}

func TestParseProblems(t *testing.T) {
	t.Parallel()
	_, probs := Parse(Raw{Ask: []string{"Bash(", "mcp__x__y(z)", "Edit()", "has space"}, Deny: []string{"WebFetch(evil)"}, Timeout: "soon"}, time.ParseDuration)
	var paths []string
	for _, p := range probs {
		paths = append(paths, p.Path)
	}
	if got := strings.Join(paths, " "); got != "deny[0] ask[0] ask[1] ask[2] ask[3] timeout" {
		t.Fatalf("problems at %s: %v", got, probs)
	}
	if !strings.Contains(probs[2].Message, "takes no argument pattern") {
		t.Errorf("mcp pattern: %s", probs[2].Message)
	}
	_, probs = Parse(Raw{Timeout: "48h"}, time.ParseDuration)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "out of range") {
		t.Errorf("48h: %v", probs)
	}
}

func TestBroker(t *testing.T) {
	t.Parallel()
	st := NewMemStore()
	b := NewBroker(st, nil)
	ctx := context.Background()
	asked := make(chan *Pending, 1)
	type result struct {
		id string
		o  Outcome
	}
	done := make(chan result, 1)
	ask := func(timeout time.Duration) {
		go func() {
			id, o := b.Ask(ctx, Request{UserID: "alice", ChatID: "c1", Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`), Rule: "Bash", Timeout: timeout}, func(p *Pending) { asked <- p })
			done <- result{id, o}
		}()
	}
	ask(time.Hour)
	p := <-asked
	if got := b.List("alice", "c1", false); len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("list: %v", got)
	}
	if got := b.List("bob", "c1", false); len(got) != 0 {
		t.Fatalf("bob sees %v", got)
	}
	if err := b.Answer(ctx, "bob", "c1", p.ID, false, Answer{Decision: Allow}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob's answer: %v", err)
	}
	if err := b.Answer(ctx, "alice", "c1", p.ID, false, Answer{Decision: "maybe"}); !errors.Is(err, ErrBadDecision) {
		t.Fatalf("bad decision: %v", err)
	}
	if err := b.Answer(ctx, "alice", "c1", p.ID, false, Answer{Decision: Deny, Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.o.Allow || r.o.By != "user" || !strings.Contains(r.o.Reason, "not now") {
		t.Fatalf("outcome %+v", r.o)
	}
	if err := b.Answer(ctx, "alice", "c1", p.ID, false, Answer{Decision: Allow}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("second answer: %v", err)
	}

	// The operator answers for anyone; remember allows the rule for the chat.
	ask(time.Hour)
	p = <-asked
	if err := b.Answer(ctx, "", "c1", p.ID, true, Answer{Decision: Allow, Remember: true}); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !r.o.Allow {
		t.Fatalf("operator allow: %+v", r.o)
	}
	ask(time.Hour)
	if r := <-done; !r.o.Allow || r.o.By != "remembered" || r.id != "" {
		t.Fatalf("remembered: %+v", r)
	}
	// A broker on the same store (the server restarted) remembers it;
	// forgetting the chat (deleting it) drops it.
	if _, o := NewBroker(st, nil).Ask(ctx, Request{UserID: "alice", ChatID: "c1", Tool: "Bash", Rule: "Bash", Timeout: time.Millisecond}, nil); o.By != "remembered" {
		t.Fatalf("after a restart: %+v", o)
	}
	if err := b.Forget(ctx, "alice", "c1"); err != nil {
		t.Fatal(err)
	}

	// No answer: denied when the time is up.
	ask(time.Millisecond)
	<-asked
	if r := <-done; r.o.Allow || r.o.By != "timeout" || !strings.Contains(r.o.Reason, "nobody answered") {
		t.Fatalf("timeout: %+v", r.o)
	}
}

// failingStore is a Store whose database is down.
type failingStore struct{ *MemStore }

var errDown = errors.New("database down")

func (*failingStore) RememberApproval(context.Context, string, string, string) error { return errDown }
func (*failingStore) ApprovalRemembered(context.Context, string, string, string) (bool, error) {
	return false, errDown
}

// TestBrokerStoreDown: when the store cannot say what was remembered the
// user is asked; an answer that cannot be remembered is refused with the
// store's error, and the call still waits for another.
func TestBrokerStoreDown(t *testing.T) {
	t.Parallel()
	b := NewBroker(&failingStore{NewMemStore()}, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	asked := make(chan *Pending, 1)
	done := make(chan Outcome, 1)
	go func() {
		_, o := b.Ask(ctx, Request{UserID: "alice", ChatID: "c1", Tool: "Bash", Rule: "Bash", Timeout: time.Hour}, func(p *Pending) { asked <- p })
		done <- o
	}()
	p := <-asked
	if err := b.Answer(ctx, "alice", "c1", p.ID, false, Answer{Decision: Allow, Remember: true}); !errors.Is(err, errDown) {
		t.Fatalf("remember with the store down: %v", err)
	}
	if got := b.List("alice", "c1", false); len(got) != 1 {
		t.Fatalf("the call no longer waits: %v", got)
	}
	if err := b.Answer(ctx, "alice", "c1", p.ID, false, Answer{Decision: Allow}); err != nil {
		t.Fatal(err)
	}
	if o := <-done; !o.Allow || o.By != "user" {
		t.Fatalf("outcome %+v", o)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	got := Diff("Edit", json.RawMessage(`{"file_path":"/w/a.txt","old_string":"a\nb\nc","new_string":"a\nB\nc"}`))
	want := "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
	if got != want {
		t.Errorf("Edit diff:\n%s\nwant\n%s", got, want)
	}
	if got := Diff("Write", json.RawMessage(`{"file_path":"/w/n","content":"x\ny\n"}`)); !strings.HasSuffix(got, "+x\n+y\n") {
		t.Errorf("Write diff: %s", got)
	}
	// A CLI's own diff of its change (Codex's) is shown as it is.
	if got := Diff("Edit", json.RawMessage(`{"file_path":"/w/a.txt","diff":"@@ -1 +1 @@\n-a\n+b"}`)); got != "--- /w/a.txt\n+++ /w/a.txt\n@@ -1 +1 @@\n-a\n+b\n" {
		t.Errorf("Edit diff of a diff: %q", got)
	}
	if Diff("Bash", json.RawMessage(`{"command":"ls"}`)) != "" {
		t.Error("Bash has a diff")
	}
}
