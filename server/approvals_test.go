package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/approval"
)

// brokerChats is the approval half of Chats over a real broker; the rest
// of Chats is not used by these routes.
type brokerChats struct {
	Chats
	b *approval.Broker
}

func (c brokerChats) Approvals(user, chatID string, operator bool) []approval.Pending {
	return c.b.List(user, chatID, operator)
}

func (c brokerChats) Approve(ctx context.Context, user, chatID, id string, operator bool, a approval.Answer) error {
	return c.b.Answer(ctx, user, chatID, id, operator, a)
}

// TestApprovalRoutes: the chat's user lists and answers its pending calls;
// another user sees none and gets a 404; a bad decision or field is a
// 400, a second answer a 409; the operator's token lists and answers
// every user's, or as the user it names with ?user=, its "remember" kept
// for the chat's user.
func TestApprovalRoutes(t *testing.T) {
	t.Parallel()
	st := approval.NewMemStore()
	b := approval.NewBroker(st, quietLogger())
	ts := startServer(t, newFake(t), func(c *Config) {
		c.Chats = brokerChats{b: b}
		c.MetricsToken = tokenOperator
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ask := func() (*approval.Pending, <-chan approval.Outcome) {
		asked, done := make(chan *approval.Pending, 1), make(chan approval.Outcome, 1)
		go func() {
			_, o := b.Ask(ctx, approval.Request{UserID: "alice", ChatID: "c1", Tool: "Bash", Input: json.RawMessage(`{"command":"git push"}`),
				Rule: "Bash(git push:*)", Timeout: time.Hour}, func(p *approval.Pending) { asked <- p })
			done <- o
		}()
		return <-asked, done
	}
	list := func(token, query string) []approval.Pending {
		t.Helper()
		resp, body := do(t, ts, "GET", "/api/chats/c1/approvals"+query, token, "")
		if resp.StatusCode != 200 {
			t.Fatalf("list: %d %s", resp.StatusCode, body)
		}
		return decode[listResponse[approval.Pending]](t, body).Data
	}
	answer := func(token, id, query, body string, status int, want string) {
		t.Helper()
		resp, got := do(t, ts, "POST", "/api/chats/c1/approvals/"+id+query, token, body)
		if resp.StatusCode != status || !strings.Contains(got, want) {
			t.Fatalf("answer %s%s %s = %d %s; want %d with %q", id, query, body, resp.StatusCode, got, status, want)
		}
	}

	p, done := ask()
	if got := list(tokenAlice, ""); len(got) != 1 || got[0].ID != p.ID || got[0].Rule != "Bash(git push:*)" || string(got[0].Input) != `{"command":"git push"}` {
		t.Fatalf("alice's list: %+v", got)
	}
	if got := list(tokenBob, ""); len(got) != 0 {
		t.Fatalf("bob sees alice's calls: %+v", got)
	}
	answer(tokenBob, p.ID, "", `{"decision":"allow"}`, 404, "no such approval")
	answer(tokenAlice, p.ID, "", `{"decision":"maybe"}`, 400, `decision must be`)
	answer(tokenAlice, p.ID, "", `{"decision":"allow","remeber":true}`, 400, "remeber")
	answer(tokenAlice, "apr_nope", "", `{"decision":"allow"}`, 404, "no such approval")
	answer("", p.ID, "", `{"decision":"allow"}`, 401, "")
	answer(tokenAlice, p.ID, "", `{"decision":"deny","reason":"not on main"}`, 200, `"decision":"deny"`)
	if o := <-done; o.Allow || !strings.Contains(o.Reason, "not on main") {
		t.Fatalf("outcome %+v", o)
	}
	answer(tokenAlice, p.ID, "", `{"decision":"allow"}`, 409, "already answered")

	// The operator: every user's calls, an answer for the user it names.
	p, done = ask()
	if got := list(tokenOperator, ""); len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("operator's list: %+v", got)
	}
	if got := list(tokenOperator, "?user=alice"); len(got) != 1 || got[0].ID != p.ID {
		t.Fatalf("operator's list of alice's calls: %+v", got)
	}
	if got := list(tokenOperator, "?user=bob"); len(got) != 0 {
		t.Fatalf("operator's list of bob's calls: %+v", got)
	}
	answer(tokenOperator, p.ID, "?user=a%20b", `{"decision":"allow"}`, 400, "user")
	answer(tokenOperator, p.ID, "?user=bob", `{"decision":"allow"}`, 404, "no such approval")
	answer(tokenOperator, p.ID, "?user=alice", `{"decision":"allow","remember":true}`, 200, `"decision":"allow"`)
	if o := <-done; !o.Allow || o.By != "user" {
		t.Fatalf("operator's allow: %+v", o)
	}
	if ok, _ := st.ApprovalRemembered(ctx, "alice", "c1", "Bash(git push:*)"); !ok {
		t.Error("the operator's remember was not kept for alice's chat")
	}
	if got := list(tokenAlice, ""); len(got) != 0 {
		t.Errorf("answered calls still listed: %+v", got)
	}
}
