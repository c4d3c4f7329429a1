package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "data", "agentbox.db"))
	t.Cleanup(func() {
		if s != nil {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()

	tests := []struct {
		name    string
		path    string
		wantErr error
	}{
		{"empty", "", ErrInvalid},
		{"memory", ":memory:", ErrInvalid},
		{"uri", "file:x.db", ErrInvalid},
		{"query", filepath.Join(dir, "x.db?mode=ro"), ErrInvalid},
		{"new nested", filepath.Join(dir, "a", "b", "c.db"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.path)
			t.Cleanup(func() {
				if s != nil {
					s.Close()
				}
			})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Open(%q) error = %v, want %v", tt.path, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			fi, err := os.Stat(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("database file mode = %o, want 600", perm)
			}
			var mode string
			if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if mode != "wal" {
				t.Errorf("journal_mode = %q, want wal", mode)
			}
		})
	}
}

func TestReopenKeepsDataAndVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.History(ctx, "u", "c"); !errors.Is(err, ErrClosed) {
		t.Fatalf("History after Close: err = %v, want ErrClosed", err)
	}

	s = openTest2(t, path)
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion {
		t.Errorf("user_version = %d, want %d", v, SchemaVersion)
	}
	h, err := s.History(ctx, "u", "c")
	if err != nil || len(h) != 1 || h[0].Content != "hi" {
		t.Fatalf("History after reopen = %v, %v", h, err)
	}
}

func openTest2(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	t.Cleanup(func() {
		if s != nil {
			s.Close()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	s := openTest2(t, path)
	if _, err := s.db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(ctx, path)
	if s2 != nil {
		s2.Close()
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "upgrade agentbox") {
		t.Errorf("error %q does not say what to do", err)
	}
}

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

func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

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
		{"other user isolated", []op{{false, "alice", "c", msgs("secret")}, {false, "bob", "c", msgs("mine")}},
			"bob", "c", msgs("mine")},
		{"other chat isolated", []op{{false, "u", "c1", msgs("one")}, {false, "u", "c2", msgs("two")}},
			"u", "c1", msgs("one")},
		{"all fields kept", []op{{false, "u", "c", []chat.Message{
			{Role: "tool", Content: "42", Name: "calc", ToolCallID: "call_1"},
			{Role: "system", Content: "be brief\nplease"},
			{Role: "assistant", Content: "ünïcödé ✓"},
		}}}, "u", "c", []chat.Message{
			{Role: "tool", Content: "42", Name: "calc", ToolCallID: "call_1"},
			{Role: "system", Content: "be brief\nplease"},
			{Role: "assistant", Content: "ünïcödé ✓"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t)
			for _, o := range tt.ops {
				var err error
				if o.replace {
					err = s.ReplaceHistory(ctx, o.user, o.chat, "asst", o.msgs)
				} else {
					err = s.AppendMessages(ctx, o.user, o.chat, "asst", o.msgs...)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.History(ctx, tt.user, tt.chat)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("History = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestHistoryTail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	if err := s.AppendMessages(ctx, "u", "c", "", msgs("1", "2", "3", "4", "5")...); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		n    int
		want []string
	}{{0, []string{"1", "2", "3", "4", "5"}}, {2, []string{"4", "5"}}, {9, []string{"1", "2", "3", "4", "5"}}} {
		got, err := s.HistoryTail(ctx, "u", "c", tt.n)
		if err != nil {
			t.Fatal(err)
		}
		var contents []string
		for _, m := range got {
			contents = append(contents, m.Content)
		}
		if !reflect.DeepEqual(contents, tt.want) {
			t.Errorf("HistoryTail(%d) = %v, want %v", tt.n, contents, tt.want)
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	long := strings.Repeat("x", MaxIDLen+1)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"history empty user", func() error { _, err := s.History(ctx, "", "c"); return err }, "user id is empty"},
		{"history empty chat", func() error { _, err := s.History(ctx, "u", ""); return err }, "chat id is empty"},
		{"append long chat", func() error { return s.AppendMessages(ctx, "u", long, "a", msgs("x")...) }, "chat id is 257 bytes"},
		{"append bad role", func() error {
			return s.AppendMessages(ctx, "u", "c", "a", chat.Message{Role: "robot", Content: "x"})
		}, `role "robot"`},
		{"append NUL", func() error { return s.AppendMessages(ctx, "u\x00", "c", "a", msgs("x")...) }, "NUL"},
		{"replace long assistant", func() error { return s.ReplaceHistory(ctx, "u", "c", long, nil) }, "assistant id"},
		{"list empty user", func() error { _, err := s.ListChats(ctx, ""); return err }, "user id is empty"},
		{"delete empty chat", func() error { return s.DeleteChat(ctx, "u", "") }, "chat id is empty"},
		{"mem empty ns", func() error { _, _, err := s.MemGet(ctx, "", "o", "k"); return err }, "namespace is empty"},
		{"mem empty key", func() error { return s.MemSet(ctx, "user", "o", "", json.RawMessage(`1`)) }, "key is empty"},
		{"mem bad json", func() error { return s.MemSet(ctx, "user", "o", "k", json.RawMessage(`{`)) }, "not valid JSON"},
		{"mem empty value", func() error { return s.MemSet(ctx, "user", "o", "k", nil) }, "not valid JSON"},
		{"mem too big", func() error {
			return s.MemSet(ctx, "user", "o", "k", json.RawMessage(`"`+strings.Repeat("a", MaxValueBytes)+`"`))
		}, "at most"},
		{"mem long key", func() error { return s.MemDel(ctx, "user", "o", strings.Repeat("k", MaxKeyLen+1)) }, "key is 513 bytes"},
		{"mem keys empty owner", func() error { _, err := s.MemKeys(ctx, "user", ""); return err }, "owner is empty"},
		{"usage no user", func() error { return s.RecordUsage(ctx, UsageRecord{}) }, "user id is empty"},
		{"usage long model", func() error { return s.RecordUsage(ctx, UsageRecord{UserID: "u", Model: long}) }, "model is"},
		{"touch empty", func() error { return s.TouchWorkspace(ctx, "", "c", time.Time{}) }, "user id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestListChatsAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
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
		if err := s.AppendMessages(ctx, "u", st.chat, st.assistant, st.msgs...); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct updated_at (milliseconds)
	}
	if err := s.AppendMessages(ctx, "other", "c9", "x", msgs("not yours")...); err != nil {
		t.Fatal(err)
	}
	chats, err := s.ListChats(ctx, "u")
	if err != nil {
		t.Fatal(err)
	}
	if len(chats) != 2 {
		t.Fatalf("ListChats = %+v, want 2 chats", chats)
	}
	c1, c2 := chats[0], chats[1]
	if c1.ID != "c1" || c1.AssistantID != "helper" || c1.Title != "hello there" || c1.Messages != 3 {
		t.Errorf("first chat = %+v", c1)
	}
	if c2.ID != "c2" || c2.Messages != 1 || !strings.HasSuffix(c2.Title, "…") || len([]rune(c2.Title)) != titleLen {
		t.Errorf("second chat = %+v (title %d runes)", c2, len([]rune(c2.Title)))
	}
	if !c1.Updated.After(c1.Created) || c1.Created.IsZero() {
		t.Errorf("c1 times: created %v updated %v", c1.Created, c1.Updated)
	}

	if err := s.ReplaceHistory(ctx, "u", "c1", "", msgs("new start")); err != nil {
		t.Fatal(err)
	}
	info, found, err := s.Chat(ctx, "u", "c1")
	if err != nil || !found || info.Title != "new start" || info.Messages != 1 {
		t.Errorf("Chat after replace = %+v, %v, %v", info, found, err)
	}

	if err := s.TouchWorkspace(ctx, "u", "c1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // idempotent
		if err := s.DeleteChat(ctx, "u", "c1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, found, _ := s.Chat(ctx, "u", "c1"); found {
		t.Error("c1 still found after DeleteChat")
	}
	if h, _ := s.History(ctx, "u", "c1"); len(h) != 0 {
		t.Errorf("history after delete = %v", h)
	}
	if _, found, _ := s.WorkspaceLastUse(ctx, "u", "c1"); found {
		t.Error("workspace record survived DeleteChat")
	}
	if chats, _ := s.ListChats(ctx, "nobody"); chats == nil || len(chats) != 0 {
		t.Errorf("ListChats(nobody) = %#v, want empty non-nil", chats)
	}
}

func TestMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	type step struct {
		op        string // set, del, clear
		ns, owner string
		key, val  string
	}
	tests := []struct {
		name      string
		steps     []step
		ns, owner string
		key       string
		wantVal   string // "" = not found
		wantKeys  []string
	}{
		{"missing", nil, "user", "alice", "k", "", []string{}},
		{"set get", []step{{"set", "user", "alice", "k", `{"a":[1,2]}`}}, "user", "alice", "k", `{"a":[1,2]}`, []string{"k"}},
		{"overwrite", []step{{"set", "user", "bob", "k", `1`}, {"set", "user", "bob", "k", `"two"`}}, "user", "bob", "k", `"two"`, []string{"k"}},
		{"delete", []step{{"set", "chat", "c1", "k", `1`}, {"del", "chat", "c1", "k", ""}, {"del", "chat", "c1", "k", ""}}, "chat", "c1", "k", "", []string{}},
		{"namespaces isolated", []step{{"set", "user", "carol", "k", `1`}}, "chat", "carol", "k", "", []string{}},
		{"owners isolated", []step{{"set", "user", "dave", "k", `1`}}, "user", "erin", "k", "", []string{}},
		{"keys sorted", []step{{"set", "user", "fay", "b", `1`}, {"set", "user", "fay", "a", `null`}, {"set", "user", "fay", "c", `[]`}},
			"user", "fay", "a", `null`, []string{"a", "b", "c"}},
		{"clear", []step{{"set", "user", "gus", "a", `1`}, {"set", "user", "gus", "b", `1`}, {"clear", "user", "gus", "", ""}},
			"user", "gus", "a", "", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, st := range tt.steps {
				var err error
				switch st.op {
				case "set":
					err = s.MemSet(ctx, st.ns, st.owner, st.key, json.RawMessage(st.val))
				case "del":
					err = s.MemDel(ctx, st.ns, st.owner, st.key)
				case "clear":
					_, err = s.MemClear(ctx, st.ns, st.owner)
				}
				if err != nil {
					t.Fatalf("%s: %v", st.op, err)
				}
			}
			v, found, err := s.MemGet(ctx, tt.ns, tt.owner, tt.key)
			if err != nil {
				t.Fatal(err)
			}
			if found != (tt.wantVal != "") || string(v) != tt.wantVal {
				t.Errorf("MemGet = %s, %v; want %q", v, found, tt.wantVal)
			}
			keys, err := s.MemKeys(ctx, tt.ns, tt.owner)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(keys, tt.wantKeys) {
				t.Errorf("MemKeys = %#v, want %#v", keys, tt.wantKeys)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []UsageRecord{
		{Time: base, UserID: "alice", ChatID: "c1", AssistantID: "qa", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.5, Turns: 1}, DurationMS: 100},
		{Time: base.Add(time.Hour), UserID: "alice", ChatID: "c1", AssistantID: "qa", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 20, OutputTokens: 7, CacheReadTokens: 3, Turns: 1}, DurationMS: 50, Error: chat.ErrRateLimit},
		{Time: base.Add(2 * time.Hour), UserID: "alice", ChatID: "c2", AssistantID: "coder", Connector: "claude", Model: "sonnet",
			Usage: chat.Usage{InputTokens: 100, OutputTokens: 50, CacheCreationTokens: 9, CostUSD: 0.25, Turns: 4}, DurationMS: 2000},
		{Time: base.Add(time.Hour), UserID: "bob", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 1000}, DurationMS: 1},
	}
	for _, r := range recs {
		if err := s.RecordUsage(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		user      string
		since     time.Time
		requests  int64
		errs      int64
		usage     chat.Usage
		byModelIn []int64 // input tokens per (connector, model), sorted
	}{
		{"alice all", "alice", time.Time{}, 3, 1,
			chat.Usage{InputTokens: 130, OutputTokens: 62, CacheReadTokens: 3, CacheCreationTokens: 9, CostUSD: 0.75, Turns: 6, DurationMS: 2150},
			[]int64{100, 30}},
		{"alice since", "alice", base.Add(time.Hour), 2, 1,
			chat.Usage{InputTokens: 120, OutputTokens: 57, CacheReadTokens: 3, CacheCreationTokens: 9, CostUSD: 0.25, Turns: 5, DurationMS: 2050},
			[]int64{100, 20}},
		{"everyone", "", time.Time{}, 4, 1,
			chat.Usage{InputTokens: 1130, OutputTokens: 62, CacheReadTokens: 3, CacheCreationTokens: 9, CostUSD: 0.75, Turns: 6, DurationMS: 2151},
			[]int64{100, 1030}},
		{"nobody", "carol", time.Time{}, 0, 0, chat.Usage{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, err := s.UsageSummary(ctx, tt.user, tt.since)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Requests != tt.requests || sum.Errors != tt.errs {
				t.Errorf("requests/errors = %d/%d, want %d/%d", sum.Requests, sum.Errors, tt.requests, tt.errs)
			}
			if !reflect.DeepEqual(sum.Usage, tt.usage) {
				t.Errorf("usage = %+v\nwant %+v", sum.Usage, tt.usage)
			}
			var in []int64
			for _, m := range sum.ByModel {
				in = append(in, m.Usage.InputTokens)
			}
			if !reflect.DeepEqual(in, tt.byModelIn) {
				t.Errorf("by model input tokens = %v, want %v (%+v)", in, tt.byModelIn, sum.ByModel)
			}
		})
	}
}

func TestWorkspaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	touch := func(user, chatID string, at time.Time) {
		t.Helper()
		if err := s.TouchWorkspace(ctx, user, chatID, at); err != nil {
			t.Fatal(err)
		}
	}
	touch("u", "old", t0)
	touch("u", "new", t0.Add(48*time.Hour))
	touch("v", "mid", t0.Add(24*time.Hour))
	touch("v", "mid", t0) // earlier touch never moves last use backwards

	got, found, err := s.WorkspaceLastUse(ctx, "v", "mid")
	if err != nil || !found || !got.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("WorkspaceLastUse = %v, %v, %v", got, found, err)
	}
	stale, err := s.StaleWorkspaces(ctx, t0.Add(30*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range stale {
		names = append(names, w.UserID+"/"+w.ChatID)
	}
	if want := []string{"u/old", "v/mid"}; !reflect.DeepEqual(names, want) {
		t.Errorf("StaleWorkspaces = %v, want %v", names, want)
	}
	if err := s.ForgetWorkspace(ctx, "u", "old"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.WorkspaceLastUse(ctx, "u", "old"); found {
		t.Error("forgotten workspace still found")
	}
	if err := s.ForgetWorkspace(ctx, "u", "never"); err != nil {
		t.Errorf("ForgetWorkspace(unknown) = %v", err)
	}
}

// TestConcurrent hammers one store from many goroutines: appends to shared
// and private chats, memory writes, usage records and reads. Every append
// must land exactly once and in a consistent order per writer.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t)
	const workers, rounds = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("c%d", w)
			for r := range rounds {
				steps := []func() error{
					func() error {
						return s.AppendMessages(ctx, "u", "shared", "a", chat.Message{Role: "user", Content: fmt.Sprintf("%d:%d", w, r)})
					},
					func() error { return s.AppendMessages(ctx, "u", own, "a", msgs(fmt.Sprint(r), "ok")...) },
					func() error {
						return s.MemSet(ctx, "user", "u", fmt.Sprintf("k%d", w), json.RawMessage(fmt.Sprint(r)))
					},
					func() error { return s.RecordUsage(ctx, UsageRecord{UserID: "u", Usage: chat.Usage{InputTokens: 1}}) },
					func() error { _, err := s.History(ctx, "u", "shared"); return err },
					func() error { _, err := s.ListChats(ctx, "u"); return err },
					func() error { return s.TouchWorkspace(ctx, "u", own, time.Time{}) },
				}
				for _, f := range steps {
					if err := f(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	shared, err := s.History(ctx, "u", "shared")
	if err != nil {
		t.Fatal(err)
	}
	if len(shared) != workers*rounds {
		t.Fatalf("shared chat has %d messages, want %d", len(shared), workers*rounds)
	}
	next := make([]int, workers) // each writer's messages appear in its own order
	for _, m := range shared {
		var w, r int
		if _, err := fmt.Sscanf(m.Content, "%d:%d", &w, &r); err != nil {
			t.Fatal(err)
		}
		if r != next[w] {
			t.Fatalf("writer %d: message %d out of order (want %d)", w, r, next[w])
		}
		next[w]++
	}
	for w := range workers {
		h, err := s.History(ctx, "u", fmt.Sprintf("c%d", w))
		if err != nil || len(h) != 2*rounds {
			t.Fatalf("chat c%d: %d messages, %v", w, len(h), err)
		}
		v, _, err := s.MemGet(ctx, "user", "u", fmt.Sprintf("k%d", w))
		if err != nil || string(v) != fmt.Sprint(rounds-1) {
			t.Errorf("memory k%d = %s, %v", w, v, err)
		}
	}
	sum, err := s.UsageSummary(ctx, "u", time.Time{})
	if err != nil || sum.Requests != workers*rounds {
		t.Errorf("usage requests = %d, %v", sum.Requests, err)
	}
	chats, _ := s.ListChats(ctx, "u")
	if len(chats) != workers+1 {
		t.Errorf("ListChats = %d chats, want %d", len(chats), workers+1)
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.AppendMessages(ctx, "u", "c", "a", msgs("x")...); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendMessages(canceled) = %v, want context.Canceled", err)
	}
	if h, err := s.History(context.Background(), "u", "c"); err != nil || len(h) != 0 {
		t.Errorf("history after canceled append = %v, %v", h, err)
	}
}

// BenchmarkAppendHistory measures one chat turn's store work on a
// 200-message chat: read the history, then append the user message and the
// answer.
func BenchmarkAppendHistory(b *testing.B) {
	ctx := context.Background()
	s := openTest(b)
	long := strings.Repeat("lorem ipsum dolor sit amet ", 20) // ~540 bytes
	var hist []chat.Message
	for i := range 200 {
		hist = append(hist, msgs(fmt.Sprint(i, long))[0])
	}
	if err := s.ReplaceHistory(ctx, "u", "c", "a", hist); err != nil {
		b.Fatal(err)
	}
	b.Run("History200", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			h, err := s.History(ctx, "u", "c")
			if err != nil || len(h) != 200 {
				b.Fatal(len(h), err)
			}
		}
	})
	b.Run("AppendMessages2", func(b *testing.B) {
		if err := s.ReplaceHistory(ctx, "u", "c2", "a", hist); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := s.AppendMessages(ctx, "u", "c2", "a", msgs("question", long)...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Turn", func(b *testing.B) {
		// History of the 200-message chat, then append the turn's question
		// and answer.
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.History(ctx, "u", "c"); err != nil {
				b.Fatal(err)
			}
			if err := s.AppendMessages(ctx, "u", "c3", "a", msgs("question", long)...); err != nil {
				b.Fatal(err)
			}
		}
	})
}
