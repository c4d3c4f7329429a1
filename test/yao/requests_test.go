package yao

import (
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/scripted"
)

// requestDifferences are the deliberate differences between the request
// agentbox sends and the one Yao's provider builds, by assistant of
// testdata/yao/requests: the fields Yao sends that agentbox does not (the
// table of docs/yao.md says why).
var requestDifferences = map[string][]string{
	// The options' limit goes as max_completion_tokens; Yao also sends the
	// connector's max_tokens beside it, a pair the API refuses.
	"capped": {"max_tokens"},
}

// TestYaoRequests runs one turn of every assistant of
// testdata/yao/requests (an app in Yao's format whose assistants each
// exercise a rule of Yao's request builders) against a scripted model,
// and compares each request with the one Yao builds for it
// (testdata/yao/requests/expected/ASSISTANT.json); looper's is the
// request of its tool loop's second round.
func TestYaoRequests(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "testdata", "yao", "requests")
	entries, err := os.ReadDir(filepath.Join(dir, "expected"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			ids = append(ids, id)
		}
	}
	// Each assistant answers "Hi."; the looper first calls its tool, and
	// the request compared is its second, with the call and its result.
	var turns []scripted.Turn
	for _, id := range ids {
		if id == "looper" {
			turns = append(turns, scripted.Turn{Thinking: "The word needs a definition.",
				ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "words__define", Input: map[string]any{"word": "hello"}}}})
		}
		turns = append(turns, scripted.Turn{Text: "Hi."})
	}
	model := scripted.NewServer(&scripted.Script{Turns: turns})
	t.Cleanup(model.Close)
	t.Setenv("YAO_REQUESTS_OPENAI", model.URL)
	t.Setenv("YAO_REQUESTS_ANTHROPIC", model.URL)
	t.Setenv("YAO_REQUESTS_KEY", "sk-requests")

	app, err := assistant.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(app.Failed) > 0 {
		t.Fatalf("assistants that do not load: %v", slices.Collect(maps.Keys(app.Failed)))
	}
	if got := slices.Sorted(maps.Keys(app.Assistants)); !slices.Equal(got, ids) {
		t.Fatalf("assistants %v, expected requests for %v", got, ids)
	}
	// What Yao's provider changes or leaves out of an assistant's options,
	// check says.
	var warned []string
	for _, w := range app.Warnings {
		warned = append(warned, w.String())
	}
	for _, want := range []string{
		"assistants/reasoner/package.yao:5:31: warning: options.temperature 0.2 is sent as 1: the model's temperature is fixed at 1",
		"assistants/local/package.yao:7:14: warning: options.tools is not sent: the model takes no tool calls",
		"assistants/claude/package.yao:7:82: warning: options.seed is not sent to an anthropic connector",
	} {
		if !slices.ContainsFunc(warned, func(w string) bool { return strings.HasPrefix(w, want) }) {
			t.Errorf("no warning %q in:\n%s", want, strings.Join(warned, "\n"))
		}
	}
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: app}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	for _, id := range ids {
		if _, err := p.Chat(context.Background(), &pipeline.Request{UserID: "u", ChatID: "c-" + id, AssistantID: id,
			Messages: []chat.Message{{Role: chat.RoleUser, Content: "Hello"}}}, nil); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		reqs := model.TurnRequests()
		r := reqs[len(reqs)-1]
		got := decode(t, r.Body)
		want := decode(t, readFile(t, filepath.Join(dir, "expected", id+".json")))
		for _, k := range requestDifferences[id] {
			delete(want, k)
		}
		if !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", "  ")
			w, _ := json.MarshalIndent(want, "", "  ")
			t.Errorf("%s: the model got\n%s\nYao sends\n%s", id, g, w)
		}
		if strings.HasSuffix(r.Path, "/messages") {
			if r.Header.Get("X-Api-Key") != "sk-requests" || r.Header.Get("Anthropic-Version") != "2023-06-01" {
				t.Errorf("%s: headers %v", id, r.Header)
			}
		} else if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-requests" {
			t.Errorf("%s: %s with headers %v", id, r.Path, r.Header)
		}
	}
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
