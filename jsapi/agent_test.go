package jsapi

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

// fakeAgents answers "re: <last message>" streamed as one text message;
// assistant "missing" fails, "slow" waits for its context to end.
type fakeAgents struct {
	mu    sync.Mutex
	calls []AgentCall
}

func (f *fakeAgents) CallAgent(ctx context.Context, call AgentCall) AgentResult {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	res := AgentResult{AssistantID: call.AssistantID, ChatID: "c1@" + call.AssistantID}
	switch call.AssistantID {
	case "missing":
		res.Err = &chat.Error{Code: chat.ErrInvalidRequest, Message: `unknown assistant "missing"`}
		return res
	case "slow":
		<-ctx.Done()
		res.Err = ctx.Err()
		return res
	}
	text := "re: " + call.Messages[len(call.Messages)-1].Content
	if call.Emit != nil {
		call.Emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Props: map[string]any{"n": 1}})
		call.Emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: text})
		call.Emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
		call.Emit(chat.Event{Event: chat.Done, Final: &chat.Final{}})
	}
	res.Content, res.FinishReason, res.Data, res.HasData = text, chat.FinishStop, map[string]any{"len": len(text)}, true
	return res
}

func TestAgentCalls(t *testing.T) {
	t.Parallel()
	fa := &fakeAgents{}
	var rec chattest.Recorder
	hc := &Context{Agents: fa, Emit: rec.Emit}
	got := run(t, `export function test(ctx: any) {
  const m = (s: string) => [{role: "user", content: s}];
  const one = ctx.agent.Call("a", m("hi"), {connector: "c2", metadata: {k: 1}, skip: {history: true}, mode: "chat"});
  const chunks: string[] = [];
  ctx.agent.Call("b", m("x"), {onChunk: (e: any) => { chunks.push(e.event + ":" + (e.text || "")); return 0; }});
  const all = ctx.agent.All([{agent: "a", messages: m("1")}, {agent: "missing", messages: m("2")}, {agent: "c", messages: m("3"), options: {stream: true}}],
    {onChunk: (id: string, i: number, e: any) => { chunks.push(id + i + e.event); return 0; }});
  const race = ctx.agent.Race([{agent: "slow", messages: m("s")}, {agent: "d", messages: m("4")}]);
  const any = ctx.agent.Any([{agent: "missing", messages: m("5")}, {agent: "slow", messages: m("s")}, {agent: "e", messages: m("6")}]);
  let stopped = "";
  ctx.agent.Call("f", m("7"), {onChunk: () => 1});
  return {one, chunks, all: all.map((r: any) => [r.agent_id, r.content || r.error, r.code || ""]),
    race: race.map((r: any) => r && r.content), any: any.map((r: any) => r && (r.content || r.code)), empty: ctx.agent.All([])};
}`, hc, nil).(map[string]any)
	wantOne := map[string]any{"agent_id": "a", "content": "re: hi", "response": map[string]any{"chat_id": "c1@a", "assistant_id": "a",
		"completion": map[string]any{"content": "re: hi", "role": "assistant", "finish_reason": "stop", "usage": got["one"].(map[string]any)["response"].(map[string]any)["completion"].(map[string]any)["usage"]},
		"next":       map[string]any{"data": map[string]any{"len": 6.0}}}}
	if !reflect.DeepEqual(got["one"], wantOne) {
		t.Errorf("Call = %v\nwant %v", got["one"], wantOne)
	}
	chunks := got["chunks"].([]any)
	// All's calls run at once: each one's events in order, any interleaving.
	var a0, c2 []any
	for _, c := range chunks[3:] {
		if strings.HasPrefix(c.(string), "a0") {
			a0 = append(a0, c)
		} else {
			c2 = append(c2, c)
		}
	}
	if want := []any{"start:", "delta:re: x", "end:", "a0start", "a0delta", "a0end", "c2start", "c2delta", "c2end"}; !reflect.DeepEqual(append(append(chunks[:3:3], a0...), c2...), want) {
		t.Errorf("chunks = %v, want %v", got["chunks"], want)
	}
	if want := []any{[]any{"a", "re: 1", ""}, []any{"missing", `unknown assistant "missing"`, "invalid_request"}, []any{"c", "re: 3", ""}}; !reflect.DeepEqual(got["all"], want) {
		t.Errorf("All = %v, want %v", got["all"], want)
	}
	if want := []any{nil, "re: 4"}; !reflect.DeepEqual(got["race"], want) {
		t.Errorf("Race = %v, want %v", got["race"], want)
	}
	if a := got["any"].([]any); a[1] != nil || a[2] != "re: 6" {
		t.Errorf("Any = %v", a)
	}
	if len(got["empty"].([]any)) != 0 {
		t.Errorf("All([]) = %v", got["empty"])
	}
	fa.mu.Lock()
	first := fa.calls[0]
	fa.mu.Unlock()
	if first.Connector != "c2" || first.Metadata["k"] != 1.0 || first.Emit != nil {
		t.Errorf("first call = %+v", first)
	}
	// Only c streamed into the turn: attributed, ids prefixed, no done.
	nested := rec.Events()
	if len(nested) != 3 {
		t.Fatalf("events = %+v, want c's three", nested)
	}
	for _, e := range nested {
		if e.Agent == nil || e.Agent.ID != "c" || !strings.HasPrefix(e.ID, e.Agent.Call+"/") {
			t.Errorf("event %+v", e)
		}
	}
}

func TestAgentCallErrors(t *testing.T) {
	t.Parallel()
	hc := &Context{Agents: &fakeAgents{}}
	m := `[{role: "user", content: "x"}]`
	cases := []struct{ stmt, msg string }{
		{`ctx.agent.Call(5, ` + m + `)`, "agent.Call: want the assistant id as the first argument, got a number"},
		{`ctx.agent.Call("a", "hi")`, "agent.Call: messages: want an array, got a string"},
		{`ctx.agent.Call("a", [])`, "agent.Call: messages is empty"},
		{`ctx.agent.Call("a", ` + m + `, {temperature: 1})`, `agent.Call: unknown option "temperature"`},
		{`ctx.agent.Call("a", ` + m + `, {stream: "yes"})`, "options.stream: want a boolean"},
		{`ctx.agent.All("a")`, "agent.All: want an array of requests"},
		{`ctx.agent.All([{agent: "a"}])`, "agent.All: requests[0]: messages: want an array, got undefined"},
		{`ctx.agent.Race([{id: "a", messages: ` + m + `}])`, `agent.Race: requests[0]: unknown field "id"`},
		{`ctx.agent.Any(Array(17).fill({agent: "a", messages: ` + m + `}))`, "agent.Any: 17 requests, at most 16"},
		{`ctx.agent.All([], {onChunk: 1})`, "agent.All: options: want only onChunk"},
	}
	for _, tc := range cases {
		t.Run(tc.stmt, func(t *testing.T) {
			t.Parallel()
			got := run(t, catchJS(tc.stmt), hc, nil).(map[string]any)
			if got["code"] != CodeInvalidArgument || !strings.Contains(got["message"].(string), tc.msg) {
				t.Fatalf("got %v, want %q", got, tc.msg)
			}
		})
	}
	// Without an Agents (a context of no turn) calls fail as results.
	got := run(t, `export function test(ctx: any) { return ctx.agent.Call("a", [{role: "user", content: "x"}]); }`, &Context{}, nil)
	if e, _ := got.(map[string]any)["error"].(string); !strings.Contains(e, "not available") {
		t.Fatalf("got %v", got)
	}
	// A throwing onChunk stops the calls and the hook gets its error.
	h := load(t, `export function test(ctx: any) { ctx.agent.All([{agent: "slow", messages: [{role: "user", content: "x"}]}, {agent: "a", messages: [{role: "user", content: "x"}]}], {onChunk: () => { throw new Error("enough") }}); }`)
	_, err := h.Call(context.Background(), hc, "test", nil)
	var je *Error
	if !errors.As(err, &je) || !strings.Contains(je.Message, "enough") {
		t.Fatalf("err = %v", err)
	}
}
