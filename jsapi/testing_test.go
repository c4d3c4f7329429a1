package jsapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
)

// loadTest compiles a test file given as src/x_test.ts.
func loadTest(t *testing.T, src string, timeout time.Duration) *Hooks {
	t.Helper()
	a := writeAssistant(t, map[string]string{"src/x_test.ts": src})
	a.Hooks, a.HookTimeout = "src/x_test.ts", timeout
	h, err := Load(a)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return h
}

const testSrc = `
function TestPasses(t, ctx) {
  t.assert.True(true); t.assert.False(false);
  t.assert.Equal({a: [1, 2]}, {a: [1, 2]}); t.assert.NotEqual(1, 2);
  t.assert.Nil(null); t.assert.Nil(undefined); t.assert.NotNil(0);
  t.assert.Contains("hello", "ell"); t.assert.NotContains("hello", "x");
  t.assert.Len("héllo", 6); t.assert.Len([1, 2], 2); t.assert.Len({a: 1}, 1);
  t.assert.Greater(2, 1); t.assert.GreaterOrEqual(2, 2); t.assert.Less(1, 2); t.assert.LessOrEqual(1, 1);
  t.assert.Error(new Error("x")); t.assert.NoError(null);
  t.assert.Panic(() => { throw new Error("x"); }); t.assert.NoPanic(() => 1);
  t.assert.Match("abc", "^a"); t.assert.NotMatch("abc", "^b");
  t.assert.Type([], "array"); t.assert.Type(1, "number"); t.assert.Type("s", "string"); t.assert.Type(true, "boolean");
  t.assert.Type(null, "null"); t.assert.Type(undefined, "undefined"); t.assert.Type(() => 1, "function"); t.assert.Type({}, "object");
  t.assert.JSONPath({a: {b: [5]}}, "$.a.b[0]", 5);
  t.Log("checked", {n: 1});
  if (t.failed) throw new Error("failed too early");
}
function TestFails(t, ctx) {
  t.assert.Equal(1, 2, "one is not two");
  t.assert.Contains("abc", "z");
  t.log("went on", t.failed);
}
function TestFatal(t) { t.fatal("stop here"); t.log("unreachable"); }
function TestSkip(t) { t.Skip("later"); t.fail("unreachable"); }
function TestThrows(t) { null.x; }
function TestYaoCaught(t) { try { Process("models.user.Get") } catch (e) { t.log(e.code) } t.assert.True(false, "no users"); }
function TestForever(t) { for (;;) {} }
function TestPanicStop(t) { t.assert.Panic(() => t.fatal("inside")); t.log("unreachable"); }
function TestCtx(t, ctx) {
  t.assert.Equal(ctx.user_id, "u1");
  t.assert.Equal(ctx.team_id, "team9");
  t.assert.Equal(ctx.agent.Call("qa", "hi").content, "qa says hi");
  t.assert.Equal(ctx.llm.Stream("c.x", [{role: "user", content: "yo"}], {temperature: 0}).content, "c.x: yo");
  t.assert.Agent("resp", "judge", {criteria: "good"});
}
function Sum(a, b) { return a + b; }
function WithCtx(ctx, x) { return {user: ctx.user_id, x}; }
`

func TestRunTest(t *testing.T) {
	h := loadTest(t, testSrc, 2*time.Second)
	run := func(fn string, x *TestCtx) (*TestingT, []string, error) {
		tt := &TestingT{Name: fn}
		yao, err := h.RunTest(context.Background(), &Context{UserID: "u1"}, fn, tt, x)
		return tt, yao, err
	}

	tt, yao, err := run("TestPasses", nil)
	if err != nil || tt.Failed() || len(yao) > 0 {
		t.Fatalf("TestPasses: err %v, failed %v %q, yao %v", err, tt.Failed(), tt.Errors(), yao)
	}
	if logs := tt.Logs(); len(logs) != 1 || logs[0] != `checked {"n":1}` {
		t.Errorf("logs = %q", logs)
	}

	tt, _, err = run("TestFails", nil)
	if err != nil || !tt.Failed() {
		t.Fatalf("TestFails: err %v failed %v", err, tt.Failed())
	}
	if errs := tt.Errors(); len(errs) != 2 || errs[0] != "one is not two" || errs[1] != `expected "abc" to contain "z"` {
		t.Errorf("errors = %q", errs)
	}
	if a := tt.FirstAssertion(); a == nil || a.Type != "Equal" || a.Expected != 2.0 || a.Actual != 1.0 || a.Message != "one is not two" {
		t.Errorf("first assertion = %+v", a)
	}
	if logs := tt.Logs(); len(logs) != 1 || logs[0] != "went on true" {
		t.Errorf("a failed assertion must not stop the test: logs %q", logs)
	}

	tt, _, err = run("TestFatal", nil)
	if err != nil || !tt.Failed() || len(tt.Logs()) != 0 || tt.Errors()[0] != "stop here" {
		t.Errorf("TestFatal: err %v failed %v logs %q", err, tt.Failed(), tt.Logs())
	}
	tt, _, err = run("TestSkip", nil)
	if skipped, why := tt.Skipped(); err != nil || !skipped || why != "later" || tt.Failed() {
		t.Errorf("TestSkip: err %v skipped %v %q failed %v", err, skipped, why, tt.Failed())
	}
	_, _, err = run("TestThrows", nil)
	var je *Error
	if !errors.As(err, &je) || je.Name != "TypeError" || je.File != "src/x_test.ts" || je.Line == 0 {
		t.Errorf("TestThrows: %#v", err)
	}
	tt, yao, err = run("TestYaoCaught", nil)
	if err != nil || len(yao) != 1 || yao[0] != `Process("models.user.Get")` || !tt.Failed() || tt.Logs()[0] != CodeYaoOnly {
		t.Errorf("TestYaoCaught: err %v yao %v logs %q", err, yao, tt.Logs())
	}
	start := time.Now()
	_, _, err = run("TestForever", nil)
	if !errors.As(err, &je) || je.Code != CodeHookTimeout {
		t.Errorf("TestForever: %v", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("the timeout took %v", d)
	}
	tt, _, err = run("TestPanicStop", nil)
	if err != nil || !tt.Failed() || len(tt.Logs()) != 0 {
		t.Errorf("t.fatal inside Panic must end the test: err %v failed %v logs %q", err, tt.Failed(), tt.Logs())
	}
	if _, _, err := run("TestMissing", nil); !errors.Is(err, ErrNoFunction) {
		t.Errorf("missing test = %v", err)
	}
}

func TestRunTestCtx(t *testing.T) {
	h := loadTest(t, testSrc, 2*time.Second)
	var judged []string
	tt := &TestingT{Name: "TestCtx", Judge: func(_ context.Context, resp any, id string, o map[string]any) (bool, string) {
		judged = append(judged, id, resp.(string), o["criteria"].(string))
		return false, "not good enough"
	}}
	x := &TestCtx{
		Fields: map[string]any{"team_id": "team9"},
		Agent: func(_ context.Context, id string, msgs []chat.Message, _ map[string]any) map[string]any {
			return map[string]any{"agent_id": id, "content": id + " says " + msgs[0].Content}
		},
		LLM: LLMFunc(func(_ context.Context, call LLMCall) LLMResult {
			if call.Options["temperature"] != 0.0 {
				return LLMResult{Err: errors.New("options lost")}
			}
			return LLMResult{Content: call.Connector + ": " + call.Messages[0].Content}
		}),
	}
	if _, err := h.RunTest(context.Background(), &Context{UserID: "u1"}, "TestCtx", tt, x); err != nil {
		t.Fatal(err)
	}
	if errs := tt.Errors(); len(errs) != 1 || errs[0] != "not good enough" {
		t.Errorf("errors = %q (only the judge's verdict should fail)", errs)
	}
	if strings.Join(judged, ",") != "judge,resp,good" {
		t.Errorf("judge got %q", judged)
	}
}

func TestApply(t *testing.T) {
	h := loadTest(t, testSrc, 2*time.Second)
	v, yao, err := h.Apply(context.Background(), &Context{}, nil, "Sum", 2, 3)
	if err != nil || v != 5.0 || len(yao) != 0 {
		t.Errorf("Sum = %v %v %v", v, yao, err)
	}
	v, _, err = h.Apply(context.Background(), &Context{UserID: "u2"}, nil, "WithCtx", CtxArg, "y")
	m, _ := v.(map[string]any)
	if err != nil || m["user"] != "u2" || m["x"] != "y" {
		t.Errorf("WithCtx = %v %v", v, err)
	}
	if _, _, err := h.Apply(context.Background(), &Context{}, nil, "Nope"); !errors.Is(err, ErrNoFunction) {
		t.Errorf("missing = %v", err)
	}
}
