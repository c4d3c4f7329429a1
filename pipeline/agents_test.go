package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/jsapi"
	"github.com/agentbox/agentbox/scripted"
)

// addAssistant adds a direct assistant id on the env's scripted model,
// with hooks (index.js source, "" for none) and a hook timeout.
func addAssistant(t *testing.T, e *env, id, hooks string, timeout time.Duration) {
	t.Helper()
	a := &assistant.Assistant{ID: id, Dir: filepath.Join(e.app.Root, id), Name: id, Connector: "test.llm", HookTimeout: timeout}
	if hooks != "" {
		writeHooks(t, a, hooks)
	}
	e.app.Assistants[id] = a
}

// fanOutScript answers each callee by what it was asked: "ask a", "ask b"
// and "ask c" quickly, "ask slow" never (it stalls until canceled).
func fanOutScript() *scripted.Script {
	var turns []scripted.Turn
	for range 4 {
		for _, w := range []string{"a", "b", "c"} {
			turns = append(turns, scripted.Turn{Text: "answer " + w, When: &scripted.Match{Contains: "ask " + w}})
		}
		turns = append(turns, scripted.Turn{Stall: true, When: &scripted.Match{Contains: "ask slow"}})
	}
	// The delegate target's own model answers last; its Next replaces it.
	for range 8 {
		turns = append(turns, scripted.Turn{Text: "echo's own"})
	}
	return &scripted.Script{Turns: turns}
}

const fanOutHooks = `
function Create(ctx, messages) {
  const q = messages[messages.length - 1].content;
  const ask = (id, what, opts) => ({agent: id, messages: [{role: "user", content: "ask " + what}], options: opts});
  let out;
  if (q === "all") {
    const rs = ctx.agent.All([ask("a", "a"), ask("b", "b", {stream: true}), ask("c", "c")]);
    out = rs.map(r => [r.agent_id, r.content, r.error || "", r.response.completion.content, r.response.chat_id]);
  } else if (q === "race") {
    const rs = ctx.agent.Race([ask("s1", "slow"), ask("b", "b"), ask("s2", "slow")]);
    out = rs.map(r => r && [r.agent_id, r.content]);
  } else if (q === "any") {
    const rs = ctx.agent.Any([ask("nope", "a"), ask("s1", "slow"), ask("c", "c")]);
    out = rs.map(r => r && [r.agent_id, r.content || "", (r.error || "").slice(0, 40)]);
  } else if (q === "all-slow") {
    ctx.agent.All([ask("a", "a"), ask("s1", "slow")]);
    out = "unreachable";
  } else if (q === "call") {
    const chunks = [];
    const r = ctx.agent.Call("a", [{role: "user", content: "ask a"}], {onChunk: m => { chunks.push(m.event + ":" + (m.text || "")); return 0; }});
    out = [r.agent_id, r.content, chunks.join(",")];
  }
  ctx.memory.context.Set("out", out);
  return {delegate: {agent_id: "echo", messages: [{role: "user", content: JSON.stringify(out)}]}};
}`

// echoHooks answers with what it was asked, through Create's delegate
// target's Next: no model call.
const echoHooks = `
function Next(ctx, payload) { return {data: payload.messages[payload.messages.length - 1].content}; }
`

func newFanOut(t *testing.T, orchTimeout time.Duration) *env {
	t.Helper()
	e := newEnv(t, fanOutScript(), "")
	addAssistant(t, e, "orch", fanOutHooks, orchTimeout)
	for _, id := range []string{"a", "b", "c", "s1", "s2"} {
		addAssistant(t, e, id, "", 0)
	}
	addAssistant(t, e, "echo", echoHooks, 0)
	return e
}

func fanOut(t *testing.T, e *env, q string) (any, *chattest.Recorder) {
	t.Helper()
	var rec chattest.Recorder
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c-" + q, AssistantID: "orch", Messages: user(q)}, rec.Emit)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	var got any
	if err := json.Unmarshal([]byte(resp.Content), &got); err != nil {
		t.Fatalf("%s: content %q: %v", q, resp.Content, err)
	}
	return got, &rec
}

// TestAgentFanOut: a Create hook calls three assistants with All (one
// streamed into the turn, attributed), then Race and Any with callees
// that never answer, which are canceled as soon as the race is decided
// (else the hook would run into its timeout and fail).
func TestAgentFanOut(t *testing.T) {
	e := newFanOut(t, time.Minute)

	got, rec := fanOut(t, e, "all")
	want := []any{
		[]any{"a", "answer a", "", "answer a", "c-all@a"},
		[]any{"b", "answer b", "", "answer b", "c-all@b"},
		[]any{"c", "answer c", "", "answer c", "c-all@c"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("All = %v, want %v", got, want)
	}
	// b's answer streamed into the turn, attributed to b, not a's or c's;
	// the turn's own answer is the delegate's.
	var nested []chat.Event
	for _, ev := range rec.Events() {
		if ev.Agent != nil {
			nested = append(nested, ev)
		}
	}
	if len(nested) == 0 {
		t.Fatal("no nested events from b")
	}
	for _, ev := range nested {
		if ev.Agent.ID != "b" || !strings.HasPrefix(ev.ID, ev.Agent.Call+"/") || ev.Event == chat.Done {
			t.Fatalf("nested event %+v", ev)
		}
	}
	if c := (&chat.Collector{}); true {
		for _, ev := range rec.Events() {
			c.Append(ev)
		}
		if strings.Contains(c.Text(), "answer b") {
			t.Fatalf("the turn's answer text carries b's: %q", c.Text())
		}
	}

	got, _ = fanOut(t, e, "race")
	if want := []any{nil, []any{"b", "answer b"}, nil}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Race = %v, want %v", got, want)
	}
	got, _ = fanOut(t, e, "any")
	rs := got.([]any)
	if rs[1] != nil || !reflect.DeepEqual(rs[2], []any{"c", "answer c", ""}) {
		t.Fatalf("Any = %v", got)
	}
	if r0, ok := rs[0].([]any); ok && !strings.Contains(r0[2].(string), "unknown assistant") && !strings.Contains(r0[2].(string), "nope") {
		t.Fatalf("Any's failed call = %v", r0)
	}

	got, _ = fanOut(t, e, "call")
	if g := got.([]any); g[0] != "a" || g[1] != "answer a" || !strings.Contains(g[2].(string), "delta:answer a") {
		t.Fatalf("Call = %v", got)
	}
}

// TestAgentAllUnderDeadline: All waits for every call, so a callee that
// never answers runs the hook into its timeout; the calls end with it and
// the turn fails with the hook's timeout.
func TestAgentAllUnderDeadline(t *testing.T) {
	e := newFanOut(t, 500*time.Millisecond)
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "orch", Messages: user("all-slow")}, nil)
	if err == nil || !strings.Contains(err.Error(), "agent.All: the calls were stopped: the hook ran past its timeout of 500ms") {
		t.Fatalf("err = %v, want the hook's timeout", err)
	}
	e.p.mu.Lock()
	n := len(e.p.active)
	e.p.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d turns still running after the hook timed out", n)
	}
}

// TestDelegate: Create and Next hand the turn to another assistant, whose
// answer (and data) is the turn's, stored in the caller's history.
func TestDelegate(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{
		{Text: "from helper", When: &scripted.Match{Contains: "helper:"}},
		{Text: "own answer"},
		{Text: "from helper", When: &scripted.Match{Contains: "helper:"}},
	}}, "")
	addAssistant(t, e, "front", `
function Create(ctx, messages) {
  const q = messages[messages.length - 1].content;
  if (q.startsWith("route")) return {delegate: {agent_id: "helper", messages: [{role: "user", content: "helper: " + q}]}};
  return null;
}
function Next(ctx, payload) {
  return {delegate: {agent_id: "helper", messages: [{role: "user", content: "helper: after " + payload.completion}]}};
}`, 10*time.Second)
	addAssistant(t, e, "helper", "", 0)
	ctx := context.Background()

	var rec chattest.Recorder
	resp, err := e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c1", AssistantID: "front", Messages: user("route me")}, rec.Emit)
	if err != nil || resp.Content != "from helper" {
		t.Fatalf("Create delegate: %v, %+v", err, resp)
	}
	if reqs := e.llm.TurnRequests(); len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "helper: route me") {
		t.Fatalf("the model got %d requests; want only the helper's", len(reqs))
	}
	var c chat.Collector
	for _, ev := range rec.Events() {
		c.Append(ev)
	}
	if c.Text() != "from helper" {
		t.Fatalf("streamed answer = %q", c.Text())
	}

	resp, err = e.p.Chat(ctx, &Request{UserID: "u1", ChatID: "c2", AssistantID: "front", Messages: user("hello")}, nil)
	if err != nil || resp.Content != "from helper" {
		t.Fatalf("Next delegate: %v, %+v", err, resp)
	}
	reqs := e.llm.TurnRequests()
	if !strings.Contains(string(reqs[len(reqs)-1].Body), "helper: after own answer") {
		t.Fatalf("helper got %s", reqs[len(reqs)-1].Body)
	}
	h, err := e.p.cfg.History.History(ctx, "u1", "c2")
	if err != nil || len(h) != 2 || h[1].Content != "from helper" {
		t.Fatalf("c2 history = %v, %v", h, err)
	}
	if h, _ := e.p.cfg.History.History(ctx, "u1", "c2@helper"); len(h) != 0 {
		t.Fatalf("the helper's turn was stored: %v", h)
	}
}

// TestAgentCycleRefused: ping calls pong, which calls ping back: the call
// closing the cycle is refused with an error naming it; a delegate that
// comes back is refused the same way.
func TestAgentCycleRefused(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "x"}}}, "")
	addAssistant(t, e, "ping", `
function Create(ctx, messages) {
  const r = ctx.agent.Call("pong", messages);
  return {delegate: {agent_id: "echo", messages: [{role: "user", content: r.error || r.content}]}};
}`, 10*time.Second)
	addAssistant(t, e, "pong", `
function Create(ctx, messages) {
  const r = ctx.agent.Call("ping", messages);
  if (r.error) throw new Error(r.code + ": " + r.error);
  return null;
}`, 10*time.Second)
	addAssistant(t, e, "echo", echoHooks, 0)
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "ping", Messages: user("go")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"invalid_request", `assistant \"ping\" is already running in this turn (ping → pong → ping)`} {
		if !strings.Contains(resp.Content, strings.ReplaceAll(want, `\"`, `"`)) {
			t.Fatalf("content = %q, want it to say %q", resp.Content, want)
		}
	}

	addAssistant(t, e, "self", `function Create() { return {delegate: {agent_id: "self"}}; }`, 10*time.Second)
	_, err = e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c2", AssistantID: "self", Messages: user("go")}, nil)
	if !errors.Is(err, ErrAgentCycle) || !strings.Contains(err.Error(), `delegated to assistant "self"`) {
		t.Fatalf("self delegate: %v", err)
	}
}

func TestAgentDepthBounded(t *testing.T) {
	e := newEnv(t, &scripted.Script{}, "")
	// d0 calls d1 calls ... each a new assistant: the chain is bounded.
	for i := range MaxAgentDepth + 2 {
		next := "d" + string(rune('0'+i+1))
		addAssistant(t, e, "d"+string(rune('0'+i)), `
function Create(ctx, messages) {
  const r = ctx.agent.Call("`+next+`", messages);
  if (r.error) throw new Error(r.error);
  return null;
}`, 10*time.Second)
	}
	_, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "d0", Messages: user("go")}, nil)
	if err == nil || !strings.Contains(err.Error(), "calls deep") {
		t.Fatalf("err = %v, want the depth bound", err)
	}
}

// TestYaoRunner: a Yao v2 sandbox with runner yao starts the sandbox for
// the hooks (ctx.computer, ctx.workspace) and answers with the model.
func TestYaoRunner(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "the model's answer"}}}, "")
	addAssistant(t, e, "v2", `
function Next(ctx, payload) {
  ctx.workspace.WriteFile("note.txt", "hi");
  const r = ctx.computer.Exec(["echo", "jsapi-v2-test"]);
  return {data: {has_computer: !!ctx.computer, stdout: r.stdout, exit_code: r.exit_code,
    read: ctx.workspace.ReadFile("note.txt"), kind: ctx.computer.Info().kind, completion: payload.completion.content}};
}`, 10*time.Second)
	e.app.Assistants["v2"].Sandbox = &assistant.Sandbox{Command: assistant.CommandYao, Image: "img", Timeout: time.Minute}
	resp, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c1", AssistantID: "v2", Messages: user("test jsapi")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"has_computer": true, "stdout": "echo jsapi-v2-test\n", "exit_code": 0.0, "read": "hi", "kind": "box", "completion": "the model's answer"}
	got, _ := json.Marshal(resp.Data)
	var gotMap map[string]any
	_ = json.Unmarshal(got, &gotMap)
	if !reflect.DeepEqual(gotMap, want) {
		t.Fatalf("data = %v, want %v", gotMap, want)
	}
	e.ex.mu.Lock()
	ran := len(e.ex.reqs)
	e.ex.mu.Unlock()
	if ran != 0 {
		t.Fatal("an executor ran for the yao runner")
	}
	if n := e.rt.Created(); n != 1 {
		t.Fatalf("%d sandboxes created, want 1", n)
	}
	if specs := e.rt.Specs(); specs[0].Network != "none" {
		t.Fatalf("the yao runner's sandbox has network %q, want none", specs[0].Network)
	}
}

// TestNestedReferers: a ctx.agent call's hooks see ctx.referer
// "agent_fork", a delegated turn's "agent", and both the caller's client.
func TestNestedReferers(t *testing.T) {
	e := newEnv(t, &scripted.Script{Turns: []scripted.Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}}, "")
	addAssistant(t, e, "front", `
function Create(ctx, messages) {
  if (messages[messages.length - 1].content === "call") {
    const r = ctx.agent.Call("helper", [{role: "user", content: "x"}]);
    return {messages: [{role: "user", content: "front saw " + r.content}]};
  }
  return {delegate: {agent_id: "helper", messages: [{role: "user", content: "x"}]}};
}`, 10*time.Second)
	addAssistant(t, e, "helper", `
function Create(ctx) {
  return {messages: [{role: "user", content: ["seen", ctx.referer, ctx.client.type, ctx.theme].join(" ")}]};
}`, 10*time.Second)
	client := jsapi.Client{Type: "macos", Theme: "dark", Referer: "api", Accept: "standard"}
	for _, q := range []string{"call", "delegate"} {
		if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c-" + q, AssistantID: "front", Messages: user(q), Client: client}, nil); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var bodies []string
	for _, r := range e.llm.TurnRequests() {
		bodies = append(bodies, string(r.Body))
	}
	all := strings.Join(bodies, "\n")
	for _, want := range []string{"seen agent_fork macos dark", "seen agent macos dark"} {
		if !strings.Contains(all, want) {
			t.Errorf("no model request holds %q:\n%s", want, all)
		}
	}
}
