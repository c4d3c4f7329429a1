package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

func testInvalidArguments(t *testing.T, o Opener) {
	s := o.Open(t)
	long := strings.Repeat("x", store.MaxIDLen+1)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"history empty user", func() error { _, err := s.History(bg, "", "c"); return err }, "user id is empty"},
		{"history empty chat", func() error { _, err := s.History(bg, "u", ""); return err }, "chat id is empty"},
		{"tail long user", func() error { _, err := s.HistoryTail(bg, long, "c", 1); return err }, "user id is 257 bytes"},
		{"append long chat", func() error { return s.AppendMessages(bg, "u", long, "a", msgs("x")...) }, "chat id is 257 bytes"},
		{"append bad role", func() error {
			return s.AppendMessages(bg, "u", "c", "a", chat.Message{Role: "robot", Content: "x"})
		}, `role "robot"`},
		{"append NUL user", func() error { return s.AppendMessages(bg, "u\x00", "c", "a", msgs("x")...) }, "NUL"},
		{"append bad UTF-8 chat", func() error { return s.AppendMessages(bg, "u", "c\xff", "a", msgs("x")...) }, "not valid UTF-8"},
		{"append NUL name", func() error {
			return s.AppendMessages(bg, "u", "c", "a", chat.Message{Role: "tool", Name: "a\x00b", Content: "x"})
		}, "name contains a NUL"},
		{"append long tool call id", func() error {
			return s.AppendMessages(bg, "u", "c", "a", chat.Message{Role: "tool", ToolCallID: long, Content: "x"})
		}, "tool call id is 257 bytes"},
		{"append too big", func() error {
			return s.AppendMessages(bg, "u", "c", "a", chat.Message{Role: "user", Content: strings.Repeat("x", store.MaxMessageBytes+1)})
		}, "at most"},
		{"replace long assistant", func() error { return s.ReplaceHistory(bg, "u", "c", long, nil) }, "assistant id"},
		{"list empty user", func() error { _, err := s.ListChats(bg, ""); return err }, "user id is empty"},
		{"chat empty chat", func() error { _, _, err := s.Chat(bg, "u", ""); return err }, "chat id is empty"},
		{"delete empty chat", func() error { return s.DeleteChat(bg, "u", "") }, "chat id is empty"},
		{"claim empty assistant", func() error { _, err := s.ClaimChat(bg, "u", "c", ""); return err }, "assistant id is empty"},
		{"mem empty ns", func() error { _, _, err := s.MemGet(bg, "", "o", "k"); return err }, "namespace is empty"},
		{"mem empty key", func() error { return s.MemSet(bg, "user", "o", "", json.RawMessage(`1`)) }, "key is empty"},
		{"mem NUL key", func() error { return s.MemSet(bg, "user", "o", "a\x00", json.RawMessage(`1`)) }, "key contains a NUL"},
		{"mem bad UTF-8 owner", func() error { return s.MemSet(bg, "user", "\xc3", "k", json.RawMessage(`1`)) }, "owner is not valid UTF-8"},
		{"mem bad json", func() error { return s.MemSet(bg, "user", "o", "k", json.RawMessage(`{`)) }, "not valid JSON"},
		{"mem empty value", func() error { return s.MemSet(bg, "user", "o", "k", nil) }, "not valid JSON"},
		{"mem bad UTF-8 value", func() error { return s.MemSet(bg, "user", "o", "k", json.RawMessage("\"\xff\"")) }, "not valid UTF-8"},
		{"mem too big", func() error {
			return s.MemSet(bg, "user", "o", "k", json.RawMessage(`"`+strings.Repeat("a", store.MaxValueBytes)+`"`))
		}, "at most"},
		{"mem long key", func() error { return s.MemDel(bg, "user", "o", strings.Repeat("k", store.MaxKeyLen+1)) }, "key is 513 bytes"},
		{"mem keys empty owner", func() error { _, err := s.MemKeys(bg, "user", ""); return err }, "owner is empty"},
		{"mem clear long owner", func() error {
			_, err := s.MemClear(bg, "user", strings.Repeat("o", store.MaxOwnerLen+1))
			return err
		}, "owner is 1028 bytes"},
		{"usage no user", func() error { return s.RecordUsage(bg, store.UsageRecord{}) }, "user id is empty"},
		{"usage long model", func() error { return s.RecordUsage(bg, store.UsageRecord{UserID: "u", Model: long}) }, "model is"},
		{"usage NUL error", func() error { return s.RecordUsage(bg, store.UsageRecord{UserID: "u", Error: "x\x00"}) }, "error code contains a NUL"},
		{"summary long user", func() error { _, err := s.UsageSummary(bg, long, time.Time{}); return err }, "user id is 257 bytes"},
		{"touch empty", func() error { return s.TouchWorkspace(bg, "", "c", time.Time{}) }, "user id is empty"},
		{"last use empty chat", func() error { _, _, err := s.WorkspaceLastUse(bg, "u", ""); return err }, "chat id is empty"},
		{"forget empty", func() error { return s.ForgetWorkspace(bg, "", "c") }, "user id is empty"},
		{"lock empty chat", func() error { _, err := s.LockChat(bg, "u", "", 1, time.Second); return err }, "chat id is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
	// Nothing of the refused writes was stored.
	if chats, _ := s.ListChats(bg, "u"); len(chats) != 0 {
		t.Errorf("refused writes left chats: %+v", chats)
	}
	if keys, _ := s.MemKeys(bg, "user", "o"); len(keys) != 0 {
		t.Errorf("refused writes left memory: %v", keys)
	}
}

func testMemory(t *testing.T, o Opener) {
	s := o.Open(t)
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
		cleared   int64
	}{
		{"missing", nil, "user", "alice", "k", "", []string{}, 0},
		{"set get", []step{{"set", "user", "alice", "k", `{"a":[1,2]}`}}, "user", "alice", "k", `{"a":[1,2]}`, []string{"k"}, 0},
		{"kept verbatim", []step{{"set", "user", "amy", "k", ` { "b" : 1.50, "a":"\u00e9" } `}}, "user", "amy", "k", ` { "b" : 1.50, "a":"\u00e9" } `, []string{"k"}, 0},
		{"overwrite", []step{{"set", "user", "bob", "k", `1`}, {"set", "user", "bob", "k", `"two"`}}, "user", "bob", "k", `"two"`, []string{"k"}, 0},
		{"delete", []step{{"set", "chat", "c1", "k", `1`}, {"del", "chat", "c1", "k", ""}, {"del", "chat", "c1", "k", ""}}, "chat", "c1", "k", "", []string{}, 0},
		{"namespaces isolated", []step{{"set", "user", "carol", "k", `1`}}, "chat", "carol", "k", "", []string{}, 0},
		{"owners isolated", []step{{"set", "user", "dave", "k", `1`}}, "user", "erin", "k", "", []string{}, 0},
		{"keys sorted byte by byte", []step{{"set", "user", "fay", "b", `1`}, {"set", "user", "fay", "a", `null`}, {"set", "user", "fay", "B", `[]`},
			{"set", "user", "fay", "é", `0`}, {"set", "user", "fay", "a b", `0`}, {"set", "user", "fay", "_", `0`}},
			"user", "fay", "a", `null`, []string{"B", "_", "a", "a b", "b", "é"}, 0},
		{"clear", []step{{"set", "user", "gus", "a", `1`}, {"set", "user", "gus", "b", `1`}, {"set", "user", "gusx", "a", `1`}, {"clear", "user", "gus", "", ""}},
			"user", "gus", "a", "", []string{}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cleared int64
			for _, st := range tt.steps {
				var err error
				switch st.op {
				case "set":
					err = s.MemSet(bg, st.ns, st.owner, st.key, json.RawMessage(st.val))
				case "del":
					err = s.MemDel(bg, st.ns, st.owner, st.key)
				case "clear":
					cleared, err = s.MemClear(bg, st.ns, st.owner)
				}
				must(t, err)
			}
			v, found, err := s.MemGet(bg, tt.ns, tt.owner, tt.key)
			must(t, err)
			if found != (tt.wantVal != "") || string(v) != tt.wantVal {
				t.Errorf("MemGet = %s, %v; want %q", v, found, tt.wantVal)
			}
			keys, err := s.MemKeys(bg, tt.ns, tt.owner)
			must(t, err)
			if !reflect.DeepEqual(keys, tt.wantKeys) {
				t.Errorf("MemKeys = %#v, want %#v", keys, tt.wantKeys)
			}
			if cleared != tt.cleared {
				t.Errorf("MemClear = %d, want %d", cleared, tt.cleared)
			}
		})
	}
	if v, _, _ := s.MemGet(bg, "user", "gusx", "a"); string(v) != "1" {
		t.Errorf("MemClear of gus cleared gusx: %s", v)
	}
}

func testUsage(t *testing.T, o Opener) {
	s := o.Open(t)
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	recs := []store.UsageRecord{
		{Time: base, UserID: "alice", ChatID: "c1", AssistantID: "qa", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.5, Turns: 1}, DurationMS: 100},
		{Time: base.Add(time.Hour), UserID: "alice", ChatID: "c1", AssistantID: "qa", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 20, OutputTokens: 7, CacheReadTokens: 3, Turns: 1}, DurationMS: 50, Error: chat.ErrRateLimit},
		{Time: base.Add(2 * time.Hour), UserID: "alice", ChatID: "c2", AssistantID: "coder", Connector: "claude", Model: "sonnet",
			Usage: chat.Usage{InputTokens: 100, OutputTokens: 50, CacheCreationTokens: 9, CostUSD: 0.25, Turns: 4}, DurationMS: 2000},
		{Time: base.Add(time.Hour), UserID: "bob", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 1000}, DurationMS: 1},
		{Time: base.Add(3 * time.Hour), UserID: "carl", Connector: "openai", Model: "gpt",
			Usage: chat.Usage{InputTokens: 1 << 40, CostUSD: 1e-9}, DurationMS: 1 << 33},
	}
	for _, r := range recs {
		must(t, s.RecordUsage(bg, r))
	}
	must(t, s.RecordUsage(bg, store.UsageRecord{UserID: "now"})) // zero time: now
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
		{"everyone until carl", "", base.Add(-time.Hour), 6, 1,
			chat.Usage{InputTokens: 1130 + 1<<40, OutputTokens: 62, CacheReadTokens: 3, CacheCreationTokens: 9, CostUSD: 0.75 + 1e-9, Turns: 6, DurationMS: 2151 + 1<<33},
			[]int64{0, 100, 1030 + 1<<40}},
		{"large numbers", "carl", time.Time{}, 1, 0, chat.Usage{InputTokens: 1 << 40, CostUSD: 1e-9, DurationMS: 1 << 33}, []int64{1 << 40}},
		{"recorded now", "now", time.Now().Add(-time.Minute), 1, 0, chat.Usage{}, []int64{0}},
		{"nobody", "zed", time.Time{}, 0, 0, chat.Usage{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sum, err := s.UsageSummary(bg, tt.user, tt.since)
			must(t, err)
			if sum.Requests != tt.requests || sum.Errors != tt.errs {
				t.Errorf("requests/errors = %d/%d, want %d/%d", sum.Requests, sum.Errors, tt.requests, tt.errs)
			}
			if !reflect.DeepEqual(sum.Usage, tt.usage) {
				t.Errorf("usage = %+v\nwant %+v", sum.Usage, tt.usage)
			}
			if sum.ByModel == nil {
				t.Error("ByModel is nil, want a list")
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
	sum, _ := s.UsageSummary(bg, "alice", time.Time{})
	if want := []string{"claude/sonnet 1 0", "openai/gpt 2 1"}; fmt.Sprint(modelRows(sum)) != fmt.Sprint(want) {
		t.Errorf("by model = %v, want %v", modelRows(sum), want)
	}
}

func modelRows(s store.UsageSummary) []string {
	var out []string
	for _, m := range s.ByModel {
		out = append(out, fmt.Sprintf("%s/%s %d %d", m.Connector, m.Model, m.Requests, m.Errors))
	}
	return out
}

func testWorkspaces(t *testing.T, o Opener) {
	s := o.Open(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	touch := func(user, chatID string, at time.Time) {
		t.Helper()
		must(t, s.TouchWorkspace(bg, user, chatID, at))
	}
	touch("u", "old", t0)
	touch("u", "new", t0.Add(48*time.Hour))
	touch("v", "mid", t0.Add(24*time.Hour))
	touch("v", "mid", t0) // earlier touch never moves last use backwards
	touch("u", "tie", t0.Add(24*time.Hour))

	got, found, err := s.WorkspaceLastUse(bg, "v", "mid")
	if err != nil || !found || !got.Equal(t0.Add(24*time.Hour)) {
		t.Errorf("WorkspaceLastUse = %v, %v, %v", got, found, err)
	}
	if _, found, err := s.WorkspaceLastUse(bg, "v", "none"); found || err != nil {
		t.Errorf("WorkspaceLastUse(unknown) = %v, %v", found, err)
	}
	stale, err := s.StaleWorkspaces(bg, t0.Add(30*time.Hour))
	must(t, err)
	var names []string
	for _, w := range stale {
		names = append(names, w.UserID+"/"+w.ChatID)
	}
	if want := []string{"u/old", "u/tie", "v/mid"}; !reflect.DeepEqual(names, want) {
		t.Errorf("StaleWorkspaces = %v, want %v (oldest first, then by user and chat)", names, want)
	}
	if len(stale) > 0 && !stale[0].LastUsed.Equal(t0) {
		t.Errorf("stale[0].LastUsed = %v, want %v", stale[0].LastUsed, t0)
	}
	if none, err := s.StaleWorkspaces(bg, t0); err != nil || none == nil || len(none) != 0 {
		t.Errorf("StaleWorkspaces(before all) = %#v, %v", none, err)
	}
	must(t, s.ForgetWorkspace(bg, "u", "old"))
	if _, found, _ := s.WorkspaceLastUse(bg, "u", "old"); found {
		t.Error("forgotten workspace still found")
	}
	must(t, s.ForgetWorkspace(bg, "u", "never"))
	touch("u", "now", time.Time{})
	if got, _, _ := s.WorkspaceLastUse(bg, "u", "now"); time.Since(got) > time.Minute || got.IsZero() {
		t.Errorf("a zero-time touch recorded %v, want now", got)
	}
}

// testUnicode: ids, keys, values and messages in any script, and message
// contents with bytes no text type holds (NUL, invalid UTF-8), come back
// exactly.
func testUnicode(t *testing.T, o Opener) {
	s := o.Open(t)
	user, chatID := "用户-ü-🙂", "чат/💬 ∑"
	ms := []chat.Message{
		{Role: "user", Content: "héllo 世界 🙂 \u200d\u202e right-to-left \u0301"},
		{Role: "assistant", Content: "NUL \x00 inside, invalid \xff\xfe UTF-8, and \r\n line ends"},
		{Role: "tool", Content: "\x00", Name: "ツール", ToolCallID: "id-é"},
		{Role: "assistant", Content: `\x41 \\x00 E'\n' $1 ?1 :name @p '; DROP TABLE messages; --`},
		{Role: "assistant", Content: "cut", Failure: chat.Failure{Code: "timeout", Message: "ü '; DROP TABLE messages; -- \u202e"}},
		{Role: "assistant", Content: "before after", Said: []chat.Said{{Content: "also 🙂 '; --", At: 7}}},
		{Role: "user", Content: "what is it? 🙂", Parts: []chat.Part{{Type: chat.PartText, Text: "what is it? 🙂"},
			{Type: chat.PartImage, ImageURL: &chat.ImageURL{URL: "data:image/png;base64,iVBORw0KGgo=", Detail: "low"}}}},
	}
	must(t, s.AppendMessages(bg, user, chatID, "助手", ms...))
	got, err := s.History(bg, user, chatID)
	must(t, err)
	if !reflect.DeepEqual(got, ms) {
		t.Errorf("History =\n%+v\nwant\n%+v", got, ms)
	}
	info, found, err := s.Chat(bg, user, chatID)
	if err != nil || !found || info.AssistantID != "助手" || info.Title != "héllo 世界 🙂 \u200d\u202e right-to-left \u0301" {
		t.Errorf("Chat = %+v, %v, %v", info, found, err)
	}
	// A title is text: a first user message with NUL and invalid UTF-8
	// gives a clean one.
	must(t, s.AppendMessages(bg, user, "t", "", chat.Message{Role: "user", Content: "a\x00b \xff c"}))
	if info, _, _ := s.Chat(bg, user, "t"); info.Title != "a b \uFFFD c" {
		t.Errorf("title = %q", info.Title)
	}
	val := json.RawMessage(`{"名前":"🙂","esc":"\u0000\ud83d\ude42","s":"'\"$1"}`)
	must(t, s.MemSet(bg, "user", user, "キー", val))
	v, found, err := s.MemGet(bg, "user", user, "キー")
	if err != nil || !found || string(v) != string(val) {
		t.Errorf("MemGet = %s, %v, %v", v, found, err)
	}
	if chats, _ := s.ListChats(bg, user); len(chats) != 2 {
		t.Errorf("ListChats = %+v", chats)
	}
	must(t, s.TouchWorkspace(bg, user, chatID, time.Time{}))
	if _, found, _ := s.WorkspaceLastUse(bg, user, chatID); !found {
		t.Error("workspace use of unicode ids not found")
	}
	must(t, s.RecordUsage(bg, store.UsageRecord{UserID: user, ChatID: chatID, Model: "模型"}))
	if sum, _ := s.UsageSummary(bg, user, time.Time{}); len(sum.ByModel) != 1 || sum.ByModel[0].Model != "模型" {
		t.Errorf("usage = %+v", sum)
	}
}

// testLargeValues: values at the limits, and histories longer than one
// statement's worth of messages, are stored whole and in order.
func testLargeValues(t *testing.T, o Opener) {
	s := o.Open(t)
	big := strings.Repeat("0123456789abcdef", store.MaxMessageBytes/16)
	must(t, s.AppendMessages(bg, "u", "big", "a", chat.Message{Role: "user", Content: big}, chat.Message{Role: "assistant", Content: big[:1000]}))
	got, err := s.History(bg, "u", "big")
	must(t, err)
	if len(got) != 2 || got[0].Content != big || got[1].Content != big[:1000] {
		t.Errorf("a %d-byte message came back as %d bytes", len(big), len(got[0].Content))
	}
	val := json.RawMessage(`"` + strings.Repeat("é", (store.MaxValueBytes-2)/2) + `"`)
	must(t, s.MemSet(bg, "user", "u", "big", val))
	if v, _, _ := s.MemGet(bg, "user", "u", "big"); string(v) != string(val) {
		t.Errorf("a %d-byte value came back as %d bytes", len(val), len(v))
	}
	maxID := strings.Repeat("i", store.MaxIDLen)
	must(t, s.AppendMessages(bg, maxID, maxID, maxID, msgs("x")...))
	if info, found, _ := s.Chat(bg, maxID, maxID); !found || info.AssistantID != maxID {
		t.Error("a chat of maximal ids is not found")
	}
	must(t, s.MemSet(bg, maxID, strings.Repeat("o", store.MaxOwnerLen), strings.Repeat("k", store.MaxKeyLen), json.RawMessage(`1`)))

	var long []chat.Message
	for i := range 1500 {
		long = append(long, msgs(fmt.Sprint(i))...)
	}
	must(t, s.ReplaceHistory(bg, "u", "long", "a", long))
	must(t, s.AppendMessages(bg, "u", "long", "a", long[:700]...))
	got, err = s.History(bg, "u", "long")
	must(t, err)
	want := append(contents(long), contents(long[:700])...)
	if !reflect.DeepEqual(contents(got), want) {
		t.Errorf("a 2200-message history came back with %d messages, or out of order", len(got))
	}
	tail, _ := s.HistoryTail(bg, "u", "long", 3)
	if fmt.Sprint(contents(tail)) != "[697 698 699]" {
		t.Errorf("tail = %v", contents(tail))
	}
	if info, _, _ := s.Chat(bg, "u", "long"); info.Messages != 2200 {
		t.Errorf("messages = %d, want 2200", info.Messages)
	}
}

// testMemoryCounters: Len, GetDel and Incr, with Incr and GetDel atomic
// across two stores on one database (two servers).
func testMemoryCounters(t *testing.T, o Opener) {
	s := o.Open(t)
	s2 := o.Reopen(t, s)
	must(t, s.MemSet(bg, "team", "t1", "a", []byte(`"x"`)))
	must(t, s.MemSet(bg, "team", "t1", "b", []byte(`2`)))
	must(t, s.MemSet(bg, "team", "t2", "a", []byte(`1`)))
	if n, err := s.MemLen(bg, "team", "t1"); err != nil || n != 2 {
		t.Fatalf("MemLen = %d, %v; want 2", n, err)
	}
	if n, err := s.MemIncr(bg, "team", "t1", "b", 5); err != nil || n != 7 {
		t.Fatalf("MemIncr(b, 5) = %d, %v; want 7", n, err)
	}
	if n, err := s.MemIncr(bg, "team", "t1", "new", -3); err != nil || n != -3 {
		t.Fatalf("MemIncr(new, -3) = %d, %v; want -3", n, err)
	}
	if _, err := s.MemIncr(bg, "team", "t1", "a", 1); !errors.Is(err, store.ErrNotInteger) {
		t.Fatalf("MemIncr of a string = %v, want ErrNotInteger", err)
	}
	must(t, s.MemSet(bg, "team", "t1", "f", []byte(`2.5`)))
	if _, err := s.MemIncr(bg, "team", "t1", "f", 1); !errors.Is(err, store.ErrNotInteger) {
		t.Fatalf("MemIncr of 2.5 = %v, want ErrNotInteger", err)
	}
	v, ok, err := s.MemGetDel(bg, "team", "t1", "a")
	if err != nil || !ok || string(v) != `"x"` {
		t.Fatalf("MemGetDel = %s, %v, %v", v, ok, err)
	}
	if _, ok, _ := s.MemGet(bg, "team", "t1", "a"); ok {
		t.Fatal("GetDel left the key")
	}
	if _, ok, err := s.MemGetDel(bg, "team", "t1", "a"); ok || err != nil {
		t.Fatalf("second MemGetDel = %v, %v", ok, err)
	}
	if v, _, _ := s.MemGet(bg, "team", "t2", "a"); string(v) != "1" {
		t.Fatalf("another owner's value changed: %s", v)
	}

	// 2 stores x 8 workers x 10 increments: none lost; each of the values
	// a GetDel race takes goes to one taker.
	var wg sync.WaitGroup
	var taken atomic.Int64
	for i := range 16 {
		st := []*store.Store{s, s2}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if _, err := st.MemIncr(bg, "chat", "c", "n", 1); err != nil {
					t.Error(err)
					return
				}
			}
			if _, ok, err := st.MemGetDel(bg, "chat", "c", "once"); err == nil && ok {
				taken.Add(1)
			}
		}()
		if i == 0 {
			must(t, s.MemSet(bg, "chat", "c", "once", []byte(`true`)))
		}
	}
	wg.Wait()
	if v, _, _ := s.MemGet(bg, "chat", "c", "n"); string(v) != "160" {
		t.Fatalf("after 160 concurrent increments n = %s", v)
	}
	if taken.Load() > 1 {
		t.Fatalf("GetDel handed one value to %d callers", taken.Load())
	}
}
