package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/store"
)

// withStore gives e's pipeline a real store for history and memory.
func withStore(t *testing.T, e *env) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.p.cfg.History, e.p.cfg.Memory = st, StoreMemory(st)
	return st
}

func TestChatsListRenameDelete(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}}}, "")
	st := withStore(t, e)
	ctx := context.Background()
	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c1", AssistantID: "coder", Messages: user("write a file")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c2", AssistantID: "qa", Messages: user("Capital of France?")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.p.cfg.Memory.Set(ctx, jsapi.NamespaceChat, jsapi.ChatOwner("u", "c1"), "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	list, err := e.p.ListChats(ctx, "u")
	if err != nil || len(list) != 2 || list[0].ID != "c2" || list[1].ID != "c1" || list[1].Title != "write a file" || list[1].AssistantID != "coder" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if other, _ := e.p.ListChats(ctx, "someone-else"); len(other) != 0 {
		t.Errorf("another user sees %v", other)
	}
	d, err := e.p.GetChat(ctx, "u", "c1")
	if err != nil || len(d.History) != 2 || d.History[1].Content != "done in sandbox" || !d.Workspace || d.Running {
		t.Fatalf("chat = %+v, %v", d, err)
	}
	if _, err := e.p.GetChat(ctx, "someone-else", "c1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another user's chat: %v", err)
	}
	info, err := e.p.RenameChat(ctx, "u", "c1", "Files")
	if err != nil || info.Title != "Files" {
		t.Fatalf("rename = %+v, %v", info, err)
	}
	if _, err := e.p.RenameChat(ctx, "u", "nope", "x"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("rename unknown: %v", err)
	}
	var ce *chat.Error
	if _, err := e.p.RenameChat(ctx, "u", "c1", "a\nb"); !errors.As(err, &ce) || ce.Code != chat.ErrInvalidRequest {
		t.Errorf("bad title: %v", err)
	}

	if err := e.p.DeleteChat(ctx, "u", "c1"); err != nil {
		t.Fatal(err)
	}
	if dirExists(filepath.Join(e.p.cfg.Workspaces.Root(), "u", "c1")) {
		t.Error("workspace left")
	}
	if keys, _ := st.MemKeys(ctx, string(jsapi.NamespaceChat), jsapi.ChatOwner("u", "c1")); len(keys) != 0 {
		t.Errorf("memory left: %v", keys)
	}
	if h, _ := st.History(ctx, "u", "c1"); len(h) != 0 {
		t.Errorf("history left: %v", h)
	}
	if _, err := e.p.GetChat(ctx, "u", "c1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("deleted chat: %v", err)
	}
	if err := e.p.DeleteChat(ctx, "u", "c1"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if list, _ := e.p.ListChats(ctx, "u"); len(list) != 1 {
		t.Errorf("after delete: %+v", list)
	}
}

func TestCancelChatAndRunningChats(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	withStore(t, e)
	started := make(chan struct{})
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx := context.Background()
	errc := make(chan error, 1)
	go func() {
		_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "new", AssistantID: "coder", Messages: user("a long job")}, nil)
		errc <- err
	}()
	<-started
	list, err := e.p.ListChats(ctx, "u")
	if err != nil || len(list) != 1 || !list[0].Running || list[0].Title != "a long job" {
		t.Fatalf("list while running = %+v, %v", list, err)
	}
	if d, err := e.p.GetChat(ctx, "u", "new"); err != nil || !d.Running {
		t.Fatalf("chat while running = %+v, %v", d, err)
	}
	if n, err := e.p.CancelChat(ctx, "u", "other"); n != 0 || err != nil {
		t.Errorf("cancel of an idle chat = %d, %v", n, err)
	}
	n, err := e.p.CancelChat(ctx, "u", "new")
	if n != 1 || err != nil {
		t.Fatalf("cancel = %d, %v", n, err)
	}
	// CancelTurns returns once the turn did: its sandbox is gone.
	if e.rt.Live() != 0 {
		t.Error("sandbox left after cancel")
	}
	var ce *chat.Error
	select {
	case err := <-errc:
		if !errors.As(err, &ce) || ce.Code != chat.ErrCanceled {
			t.Errorf("turn ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("turn still running")
	}
}

// TestFailedTurnIsKept: a turn that fails after it held its chat is in the
// chat's history (its message, and its error on the answer), so the chat
// is titled by that message and shows what went wrong; the next turn's
// model does not see the failed exchange.
func TestFailedTurnIsKept(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{
		{Error: &scripted.HTTPError{Status: 401, Message: "invalid x-api-key"}},
		{Text: "Paris."},
	}}, "")
	st := withStore(t, e)
	ctx := context.Background()
	_, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c1", AssistantID: "qa", Messages: user("Capital of France?")}, nil)
	var ce *chat.Error
	if !errors.As(err, &ce) {
		t.Fatalf("first turn: %v, want an error", err)
	}
	chats, err := e.p.ListChats(ctx, "u")
	if err != nil || len(chats) != 1 || chats[0].Title != "Capital of France?" {
		t.Fatalf("chats after the failed turn = %+v, %v", chats, err)
	}
	d, err := e.p.GetChat(ctx, "u", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if h := d.History; len(h) != 2 || h[0].Content != "Capital of France?" || h[1].Role != chat.RoleAssistant ||
		h[1].Failure.Code != ce.Code || h[1].Failure.Message != ce.Message {
		t.Fatalf("history = %+v, want the message and the error %s", d.History, ce)
	}

	if _, err := e.p.Chat(ctx, &Request{UserID: "u", ChatID: "c1", AssistantID: "qa", Messages: user("And its population?")}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := e.llm.TurnRequests()
	if body := string(reqs[len(reqs)-1].Body); strings.Contains(body, "Capital of France?") || strings.Contains(body, "invalid x-api-key") {
		t.Errorf("the model saw the failed exchange: %s", body)
	}
	h, _ := st.History(ctx, "u", "c1")
	if len(h) != 4 || h[3].Content != "Paris." || h[3].Failure.Code != "" {
		t.Errorf("history after the next turn = %+v", h)
	}
}

// TestAnswered: what a model sees of a stored history with failed turns.
func TestAnswered(t *testing.T) {
	fail := chat.Failure{Code: "timeout", Message: "took too long"}
	msgs := []chat.Message{
		{Role: chat.RoleUser, Content: "a"}, {Role: chat.RoleAssistant, Content: "A"},
		{Role: chat.RoleUser, Content: "b"}, {Role: chat.RoleAssistant, Failure: fail},
		{Role: chat.RoleUser, Content: "c"}, {Role: chat.RoleAssistant, Content: "C, cut", Failure: fail},
		{Role: chat.RoleUser, Content: "d"},
	}
	var got []string
	for _, m := range answered(msgs) {
		if m.Failure.Code != "" {
			t.Errorf("a failure reached the model: %+v", m)
		}
		got = append(got, m.Content)
	}
	if want := "a A c C, cut d"; strings.Join(got, " ") != want {
		t.Errorf("answered = %q, want %q", strings.Join(got, " "), want)
	}
}
