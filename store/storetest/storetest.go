// Package storetest is the store's conformance suite: every driver passes
// it (store/conformance_test.go runs it on SQLite and on PostgreSQL). It
// covers every method, invalid input, ordering, unicode and large values,
// concurrency, context cancellation and the chat lock's semantics, within
// one store and, for drivers whose locks are shared, across two stores on
// one database (two servers).
package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

// Opener opens the stores the suite runs on.
type Opener struct {
	// Open returns a store on a new, empty database of its own, closed
	// when t ends.
	Open func(t testing.TB) *store.Store
	// Reopen returns another store on s's database, as a second server
	// sharing it would have, closed when t ends.
	Reopen func(t testing.TB, s *store.Store) *store.Store
}

// Run runs the suite. Its subtests run in parallel.
func Run(t *testing.T, o Opener) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"History", testHistory},
		{"HistoryTail", testHistoryTail},
		{"HistoryKeepsToolCalls", testHistoryKeepsToolCalls},
		{"Responses", testResponses},
		{"InvalidArguments", testInvalidArguments},
		{"ListChatsAndDelete", testListChatsAndDelete},
		{"ClaimChat", testClaimChat},
		{"RenameChat", testRenameChat},
		{"SkillProposals", testSkillProposals},
		{"SkillApprovalRace", testSkillApprovalRace},
		{"RememberedApprovals", testRememberedApprovals},
		{"Memory", testMemory},
		{"MemoryCounters", testMemoryCounters},
		{"Usage", testUsage},
		{"UsageEgress", testUsageEgress},
		{"Workspaces", testWorkspaces},
		{"Unicode", testUnicode},
		{"LargeValues", testLargeValues},
		{"Concurrent", testConcurrent},
		{"ConcurrentStores", testConcurrentStores},
		{"CanceledContext", testCanceledContext},
		{"Closed", testClosed},
		{"Reopen", testReopen},
		{"ChatLock", testChatLock},
		{"ChatLockOrder", testChatLockOrder},
		{"ChatLockCancel", testChatLockCancel},
		{"ChatLockExclusive", testChatLockExclusive},
		{"ChatLockAcrossStores", testChatLockAcrossStores},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, o)
		})
	}
}

var bg = context.Background()

func msgs(contents ...string) []chat.Message {
	out := make([]chat.Message, len(contents))
	for i, c := range contents {
		role := chat.RoleUser
		if i%2 == 1 {
			role = chat.RoleAssistant
		}
		out[i] = chat.Message{Role: role, Content: c}
	}
	return out
}

func contents(ms []chat.Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Content)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testHistory(t *testing.T, o Opener) {
	type op struct {
		replace bool
		user    string
		chat    string
		msgs    []chat.Message
	}
	tests := []struct {
		name string
		ops  []op
		user string
		chat string
		want []chat.Message
	}{
		{"unknown chat", nil, "u", "c", []chat.Message{}},
		{"append twice", []op{{false, "u", "c", msgs("q1", "a1")}, {false, "u", "c", msgs("q2", "a2")}},
			"u", "c", msgs("q1", "a1", "q2", "a2")},
		{"replace", []op{{false, "u", "c", msgs("q1", "a1")}, {true, "u", "c", msgs("x")}},
			"u", "c", msgs("x")},
		{"replace then append", []op{{true, "u", "c", msgs("x", "y")}, {false, "u", "c", msgs("z")}},
			"u", "c", append(msgs("x", "y"), chat.Message{Role: "user", Content: "z"})},
		{"replace with empty", []op{{false, "u", "c", msgs("q1")}, {true, "u", "c", nil}},
			"u", "c", []chat.Message{}},
		{"append none", []op{{false, "u", "c", msgs("q1")}, {false, "u", "c", nil}}, "u", "c", msgs("q1")},
		{"other user isolated", []op{{false, "alice", "c", msgs("secret")}, {false, "bob", "c", msgs("mine")}},
			"bob", "c", msgs("mine")},
		{"other chat isolated", []op{{false, "u", "c1", msgs("one")}, {false, "u", "c2", msgs("two")}},
			"u", "c1", msgs("one")},
		{"ids differing in case", []op{{false, "u", "C", msgs("upper")}, {false, "u", "c", msgs("lower")}},
			"u", "C", msgs("upper")},
		{"all fields kept", []op{{false, "u", "c", []chat.Message{
			{Role: "tool", Content: "42", Name: "calc", ToolCallID: "call_1"},
			{Role: "system", Content: "be brief\nplease"},
			{Role: "assistant", Content: ""},
			{Role: "assistant", Content: "  padded  \t"},
		}}}, "u", "c", []chat.Message{
			{Role: "tool", Content: "42", Name: "calc", ToolCallID: "call_1"},
			{Role: "system", Content: "be brief\nplease"},
			{Role: "assistant", Content: ""},
			{Role: "assistant", Content: "  padded  \t"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := o.Open(t)
			for _, op := range tt.ops {
				if op.replace {
					must(t, s.ReplaceHistory(bg, op.user, op.chat, "asst", op.msgs))
				} else {
					must(t, s.AppendMessages(bg, op.user, op.chat, "asst", op.msgs...))
				}
			}
			got, err := s.History(bg, tt.user, tt.chat)
			must(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("History = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func testHistoryTail(t *testing.T, o Opener) {
	s := o.Open(t)
	must(t, s.AppendMessages(bg, "u", "c", "", msgs("1", "2", "3")...))
	must(t, s.AppendMessages(bg, "u", "c", "", msgs("4", "5")...))
	for _, tt := range []struct {
		n    int
		want []string
	}{{0, []string{"1", "2", "3", "4", "5"}}, {-1, []string{"1", "2", "3", "4", "5"}}, {1, []string{"5"}},
		{2, []string{"4", "5"}}, {9, []string{"1", "2", "3", "4", "5"}}} {
		got, err := s.HistoryTail(bg, "u", "c", tt.n)
		must(t, err)
		if !reflect.DeepEqual(contents(got), tt.want) {
			t.Errorf("HistoryTail(%d) = %v, want %v", tt.n, contents(got), tt.want)
		}
	}
	if got, err := s.HistoryTail(bg, "u", "none", 3); err != nil || got == nil || len(got) != 0 {
		t.Errorf("HistoryTail of an unknown chat = %#v, %v; want empty", got, err)
	}
}

func testListChatsAndDelete(t *testing.T, o Opener) {
	s := o.Open(t)
	long := strings.Repeat("word ", 40)
	steps := []struct {
		chat, assistant string
		msgs            []chat.Message
	}{
		{"c1", "helper", msgs("  hello\n  there ", "hi")},
		{"c2", "coder", msgs(long)},
		{"c1", "", msgs("again")}, // keeps assistant and title, moves c1 to the top
	}
	for _, st := range steps {
		must(t, s.AppendMessages(bg, "u", st.chat, st.assistant, st.msgs...))
		time.Sleep(2 * time.Millisecond) // distinct updated_at (milliseconds)
	}
	must(t, s.AppendMessages(bg, "other", "c9", "x", msgs("not yours")...))
	chats, err := s.ListChats(bg, "u")
	must(t, err)
	if len(chats) != 2 {
		t.Fatalf("ListChats = %+v, want 2 chats", chats)
	}
	c1, c2 := chats[0], chats[1]
	if c1.ID != "c1" || c1.AssistantID != "helper" || c1.Title != "hello there" || c1.Messages != 3 {
		t.Errorf("first chat = %+v", c1)
	}
	if c2.ID != "c2" || c2.AssistantID != "coder" || c2.Messages != 1 || !strings.HasSuffix(c2.Title, "…") || len([]rune(c2.Title)) != 80 {
		t.Errorf("second chat = %+v (title %d runes)", c2, len([]rune(c2.Title)))
	}
	if !c1.Updated.After(c1.Created) || c1.Created.IsZero() || time.Since(c1.Created) > time.Minute {
		t.Errorf("c1 times: created %v updated %v", c1.Created, c1.Updated)
	}

	// Chats updated in the same millisecond come in id order.
	at := []string{"b", "a", "c"}
	for _, id := range at {
		must(t, s.AppendMessages(bg, "tie", id, "", msgs("x")...))
	}
	ties, err := s.ListChats(bg, "tie")
	must(t, err)
	for i := 1; i < len(ties); i++ {
		p, c := ties[i-1], ties[i]
		if p.Updated.Before(c.Updated) || p.Updated.Equal(c.Updated) && p.ID > c.ID {
			t.Errorf("ListChats order: %s (%v) before %s (%v)", p.ID, p.Updated, c.ID, c.Updated)
		}
	}

	must(t, s.ReplaceHistory(bg, "u", "c1", "", msgs("new start")))
	info, found, err := s.Chat(bg, "u", "c1")
	if err != nil || !found || info.Title != "new start" || info.Messages != 1 || info.AssistantID != "helper" {
		t.Errorf("Chat after replace = %+v, %v, %v", info, found, err)
	}
	must(t, s.AppendMessages(bg, "u", "c1", "", msgs("more")...))
	if info, _, _ := s.Chat(bg, "u", "c1"); info.Messages != 2 {
		t.Errorf("messages after replace and append = %d, want 2", info.Messages)
	}
	if _, found, err := s.Chat(bg, "u", "never"); found || err != nil {
		t.Errorf("Chat(unknown) = %v, %v", found, err)
	}

	must(t, s.TouchWorkspace(bg, "u", "c1", time.Time{}))
	must(t, s.MemSet(bg, "chat", "u/c1", "k", []byte(`1`)))
	for range 2 { // idempotent
		must(t, s.DeleteChat(bg, "u", "c1"))
	}
	if _, found, _ := s.Chat(bg, "u", "c1"); found {
		t.Error("c1 still found after DeleteChat")
	}
	if h, _ := s.History(bg, "u", "c1"); len(h) != 0 {
		t.Errorf("history after delete = %v", h)
	}
	if _, found, _ := s.WorkspaceLastUse(bg, "u", "c1"); found {
		t.Error("workspace record survived DeleteChat")
	}
	if _, found, _ := s.MemGet(bg, "chat", "u/c1", "k"); !found {
		t.Error("DeleteChat removed hook memory, which its caller owns")
	}
	if chats, _ := s.ListChats(bg, "u"); len(chats) != 1 || chats[0].ID != "c2" {
		t.Errorf("ListChats after delete = %+v", chats)
	}
	// A deleted chat starts again from nothing.
	must(t, s.AppendMessages(bg, "u", "c1", "qa", msgs("reborn")...))
	if info, _, _ := s.Chat(bg, "u", "c1"); info.Messages != 1 || info.AssistantID != "qa" || info.Title != "reborn" {
		t.Errorf("chat after delete and append = %+v", info)
	}
	if chats, _ := s.ListChats(bg, "nobody"); chats == nil || len(chats) != 0 {
		t.Errorf("ListChats(nobody) = %#v, want empty non-nil", chats)
	}
}

// testClaimChat: the first assistant to claim a chat owns it; later claims
// by others get the owner; a chat written before claims existed is owned
// by its first claimant; concurrent claims of a new chat agree on one
// owner.
func testClaimChat(t *testing.T, o Opener) {
	s := o.Open(t)
	for _, tc := range []struct{ chat, asst, want string }{
		{"c1", "coder", "coder"},
		{"c1", "qa", "coder"},
		{"c1", "coder", "coder"},
		{"c2", "qa", "qa"},
	} {
		got, err := s.ClaimChat(bg, "alice", tc.chat, tc.asst)
		if err != nil || got != tc.want {
			t.Errorf("ClaimChat(%s, %s) = %q, %v; want %q", tc.chat, tc.asst, got, err, tc.want)
		}
	}
	if got, _ := s.ClaimChat(bg, "bob", "c1", "qa"); got != "qa" {
		t.Errorf("bob's c1 owner = %q", got)
	}
	info, found, err := s.Chat(bg, "alice", "c1")
	if err != nil || !found || info.AssistantID != "coder" || info.Messages != 0 || info.Title != "" {
		t.Errorf("claimed chat = %+v %v %v", info, found, err)
	}
	must(t, s.AppendMessages(bg, "alice", "c1", "coder", chat.Message{Role: chat.RoleUser, Content: "hi"}))
	if info, _, _ := s.Chat(bg, "alice", "c1"); info.Messages != 1 || info.Title != "hi" {
		t.Errorf("claimed chat after a turn = %+v", info)
	}
	must(t, s.AppendMessages(bg, "alice", "old", "", chat.Message{Role: chat.RoleUser, Content: "hi"}))
	if got, _ := s.ClaimChat(bg, "alice", "old", "qa"); got != "qa" {
		t.Errorf("unowned chat claimed by %q", got)
	}
	if _, err := s.ClaimChat(bg, "alice", "c3", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("empty assistant: %v", err)
	}
	owners := make([]string, 8)
	errs := make([]error, 8)
	s2 := o.Reopen(t, s)
	done := make(chan struct{})
	for i := range owners {
		go func() {
			defer func() { done <- struct{}{} }()
			st := s
			if i%2 == 1 {
				st = s2
			}
			owners[i], errs[i] = st.ClaimChat(bg, "alice", "race", string(rune('a'+i)))
		}()
	}
	for range owners {
		<-done
	}
	for i, o := range owners {
		if errs[i] != nil || o != owners[0] {
			t.Fatalf("concurrent claims disagree: %v %v", owners, errs)
		}
	}
}
