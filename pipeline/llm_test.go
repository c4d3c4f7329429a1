package pipeline

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/scripted"
)

// TestHookLLM: a Next hook calls the app's connector with ctx.llm (one
// Stream, an All with a connector that does not exist, an option the
// model options lack): the answers stream to the client as the hook's
// messages, the failures are results naming what was wrong, and the
// calls' tokens count in the turn's usage (done event and response).
func TestHookLLM(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{
		{Text: "turn answer", Usage: &scripted.Usage{InputTokens: 100, OutputTokens: 10}},
		{Text: "short a", When: &scripted.Match{Contains: "sum: a"}, Usage: &scripted.Usage{InputTokens: 7, OutputTokens: 2}},
		{Text: "short b", When: &scripted.Match{Contains: "sum: b"}, Usage: &scripted.Usage{InputTokens: 5, OutputTokens: 1}},
	}}, "")
	addAssistant(t, e, "orch", `
function Next(ctx, payload) {
  const one = ctx.llm.Stream("test.llm", [{role: "system", content: "Be brief."}, {role: "user", content: "sum: a"}], {temperature: 0.2, max_tokens: 50});
  const all = ctx.llm.All([{connector: "test.llm", messages: [{role: "user", content: "sum: b"}]},
    {connector: "nope", messages: [{role: "user", content: "x"}]}]);
  const bad = ctx.llm.Stream("test.llm", [{role: "user", content: "sum: c"}], {temprature: 1});
  return {data: [one.content, one.response.usage.total_tokens, all[0].content, all[1].code, all[1].error, bad.code, bad.error]};
}`, 30*time.Second)
	var rec chattest.Recorder
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "orch", Messages: user("go")}, rec.Emit)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Data.([]any)
	want := []any{"short a", 9.0, "short b", "invalid_request", `connector "nope" does not exist (the app has test.llm)`, "invalid_request"}
	if !reflect.DeepEqual(got[:6], want) || !strings.Contains(got[6].(string), "temprature") {
		t.Fatalf("results = %v\nwant %v and an error naming temprature", got, want)
	}
	if resp.Usage.InputTokens != 112 || resp.Usage.OutputTokens != 13 {
		t.Errorf("usage = %+v, want the turn's and the hook's calls' (112 in, 13 out)", resp.Usage)
	}
	var final *chat.Final
	streamed := map[string]string{}
	for _, ev := range rec.Events() {
		if ev.Event == chat.Done {
			final = ev.Final
		}
		if strings.HasPrefix(ev.ID, "llm-") && ev.Event == chat.Delta {
			streamed[strings.SplitN(ev.ID, "/", 2)[0]] += ev.Text
		}
	}
	if final == nil || final.Usage.InputTokens != 112 {
		t.Errorf("done usage = %+v", final)
	}
	if want := map[string]string{"llm-1": "short a", "llm-2": "short b"}; !reflect.DeepEqual(streamed, want) {
		t.Errorf("streamed = %v, want %v", streamed, want)
	}
}
