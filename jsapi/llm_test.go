package jsapi

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

// fakeLLM answers "<connector>: <last message>", streaming it as one text
// message; connector "down" fails, "slow" waits for its context.
var fakeLLM = LLMFunc(func(ctx context.Context, call LLMCall) LLMResult {
	res := LLMResult{Connector: call.Connector, Model: "m-" + call.Connector}
	switch call.Connector {
	case "down":
		res.Err = &chat.Error{Code: chat.ErrCircuitOpen, Message: "connector down is failing"}
		return res
	case "slow":
		<-ctx.Done()
		res.Err = ctx.Err()
		return res
	case "missing":
		res.Err = &chat.Error{Code: chat.ErrInvalidRequest, Message: `connector "missing" does not exist`}
		return res
	}
	text := call.Connector + ": " + call.Messages[len(call.Messages)-1].Content
	if call.Emit != nil {
		call.Emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeText})
		call.Emit(chat.Event{Event: chat.Delta, ID: "t1", Type: chat.TypeText, Text: text})
		call.Emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeText})
	}
	res.Content, res.FinishReason = text, chat.FinishStop
	res.Usage = chat.Usage{InputTokens: 3, OutputTokens: 2}
	res.ToolCalls = []chat.ToolCall{{ID: "c1", Name: "f", Input: chat.RawJSON(`{"a":1}`)}}
	return res
})

func TestLLMCalls(t *testing.T) {
	t.Parallel()
	var rec chattest.Recorder
	var mu sync.Mutex
	var opts []map[string]any
	llm := LLMFunc(func(ctx context.Context, call LLMCall) LLMResult {
		mu.Lock()
		opts = append(opts, call.Options)
		mu.Unlock()
		return fakeLLM(ctx, call)
	})
	got := run(t, `export function test(ctx: any) {
  const m = (s: string) => [{role: "system", content: "be brief"}, {role: "user", content: s}];
  const pieces: string[] = [];
  const one = ctx.llm.Stream("a", m("hi"), {temperature: 0.5, onChunk: (c: any) => { pieces.push(c.type + ":" + c.event + ":" + (c.props.content || "")); return 0; }});
  const all = ctx.llm.All([{connector: "b", messages: m("1")}, {connector: "down", messages: m("2")}],
    {onChunk: (id: string, i: number, c: any) => { pieces.push(id + i + c.event); return 0; }});
  const race = ctx.llm.Race([{connector: "slow", messages: m("s")}, {connector: "c", messages: m("3")}]);
  const any = ctx.llm.Any([{connector: "down", messages: m("4")}, {connector: "d", messages: m("5")}]);
  const none = ctx.llm.Any([{connector: "down", messages: m("6")}, {connector: "missing", messages: m("7")}]);
  ctx.llm.Stream("e", m("8"), {onChunk: () => 1});
  return {one, pieces, all: all.map((r: any) => r.content || r.code), race: race.map((r: any) => r.content),
    any: any.map((r: any) => r.content), none: none.map((r: any) => r.code).sort(), empty: ctx.llm.All([])};
}`, &Context{LLM: llm, Emit: rec.Emit}, nil).(map[string]any)
	wantOne := map[string]any{"connector": "a", "content": "a: hi", "response": map[string]any{
		"object": "chat.completion", "model": "m-a", "role": "assistant", "content": "a: hi", "finish_reason": "stop",
		"tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"a":1}`}}},
		"usage":      map[string]any{"prompt_tokens": 3.0, "completion_tokens": 2.0, "total_tokens": 5.0}}}
	if !reflect.DeepEqual(got["one"], wantOne) {
		t.Errorf("Stream = %v\nwant %v", got["one"], wantOne)
	}
	if want := []any{"text:start:", "text:delta:a: hi", "text:end:", "b0start", "b0delta", "b0end"}; !reflect.DeepEqual(got["pieces"], want) {
		t.Errorf("pieces = %v, want %v", got["pieces"], want)
	}
	if want := []any{"b: 1", "circuit_open"}; !reflect.DeepEqual(got["all"], want) {
		t.Errorf("All = %v, want %v", got["all"], want)
	}
	// Yao's Race and Any give the winner alone; Any with no success every failure.
	if want := []any{"c: 3"}; !reflect.DeepEqual(got["race"], want) {
		t.Errorf("Race = %v, want %v", got["race"], want)
	}
	if want := []any{"d: 5"}; !reflect.DeepEqual(got["any"], want) {
		t.Errorf("Any = %v, want %v", got["any"], want)
	}
	if want := []any{"circuit_open", "invalid_request"}; !reflect.DeepEqual(got["none"], want) {
		t.Errorf("Any (all failed) = %v, want %v", got["none"], want)
	}
	if len(got["empty"].([]any)) != 0 {
		t.Errorf("All([]) = %v", got["empty"])
	}
	mu.Lock()
	if opts[0]["temperature"] != 0.5 || opts[0]["onChunk"] != nil {
		t.Errorf("Stream's options = %v (temperature kept, onChunk taken out)", opts[0])
	}
	mu.Unlock()
	// Every answer streamed to the client, each call's ids its own.
	ids := map[string]bool{}
	for _, e := range rec.Events() {
		if !strings.HasPrefix(e.ID, "llm-") || !strings.HasSuffix(e.ID, "/t1") {
			t.Errorf("event id %q, want llm-N/t1", e.ID)
		}
		ids[e.ID] = true
	}
	if len(ids) < 5 {
		t.Errorf("streamed messages %v: want one per answered call", ids)
	}
}

func TestLLMCallErrors(t *testing.T) {
	t.Parallel()
	hc := &Context{LLM: fakeLLM}
	m := `[{role: "user", content: "x"}]`
	cases := []struct{ stmt, msg string }{
		{`ctx.llm.Stream(5, ` + m + `)`, "llm.Stream: want the connector id as the first argument, got a number"},
		{`ctx.llm.Stream("a", [])`, "llm.Stream: messages is empty"},
		{`ctx.llm.Stream("a", ` + m + `, 3)`, "llm.Stream: options: want an object, got a number"},
		{`ctx.llm.All([{connector: "a", messages: ` + m + `, options: {onChunk: () => 0}}])`, "llm.All: requests[0]: options.onChunk: a batch takes one onChunk"},
		{`ctx.llm.All([{agent: "a", messages: ` + m + `}])`, `llm.All: requests[0]: unknown field "agent"`},
		{`ctx.llm.Race([{messages: ` + m + `}])`, "llm.Race: requests[0].connector: want a connector id"},
		{`ctx.llm.Any(Array(17).fill({connector: "a", messages: ` + m + `}))`, "llm.Any: 17 requests, at most 16"},
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
	// Without an LLM (a context of no turn) calls fail as results.
	got := run(t, `export function test(ctx: any) { return ctx.llm.Stream("a", `+m+`); }`, &Context{}, nil).(map[string]any)
	if got["connector"] != "a" || !strings.Contains(got["error"].(string), "not available") {
		t.Errorf("without LLM: %v", got)
	}
}

// A hook that waits on calls past its timeout stops them and throws.
func TestLLMCallTimeout(t *testing.T) {
	t.Parallel()
	h := load(t, `export function test(ctx: any) { return ctx.llm.All([{connector: "slow", messages: [{role: "user", content: "x"}]}]); }`)
	h.timeout = 200 * time.Millisecond
	_, err := h.Call(context.Background(), &Context{LLM: fakeLLM}, "test", nil)
	var je *Error
	if !errors.As(err, &je) || !strings.Contains(je.Message, "llm.All: the calls were stopped: the hook ran past its timeout") {
		t.Fatalf("err = %v", err)
	}
}
