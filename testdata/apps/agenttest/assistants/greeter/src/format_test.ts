// Script tests of the greeter's helpers, in Yao's form: Test...(t, ctx).
import { Greeting, Slug, Words } from "./format";

function TestGreeting(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(Greeting("Ada"), "Hello, Ada!", "greets by name");
  t.assert.Equal(Greeting("  "), "Hello!", "greets without a name");
  t.assert.Contains(Greeting("Bob"), "Bob");
  t.assert.NotContains(Greeting("Bob"), "Ada");
  t.log("greetings checked");
}

function TestSlug(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(Slug("Hello, World!"), "hello-world");
  t.assert.Match(Slug("A b C"), "^[a-z-]+$");
  t.assert.NotMatch(Slug("A b C"), "[A-Z ]");
  t.assert.Len(Slug("abc"), 3);
}

function TestValues(t: testing.T, ctx: agent.Context) {
  const words = Words("one two  three");
  t.assert.Len(words, 3, "three words");
  t.assert.Type(words, "array");
  t.assert.Type("x", "string");
  t.assert.Type(1, "number");
  t.assert.Type({}, "object");
  t.assert.Type(null, "null");
  t.assert.True(words.length > 2);
  t.assert.False(words.length > 3);
  t.assert.NotEqual(words[0], words[1]);
  t.assert.Equal({ a: [1, 2], b: "c" }, { b: "c", a: [1, 2] }, "objects compare by value");
  t.assert.Greater(3, 2);
  t.assert.GreaterOrEqual(3, 3);
  t.assert.Less(1, 2);
  t.assert.LessOrEqual(2, 2);
  t.assert.Nil(null);
  t.assert.Nil(undefined);
  t.assert.NotNil(0);
  t.assert.NoError(null);
  t.assert.Error(new Error("boom"));
  t.assert.Panic(() => { throw new Error("boom"); });
  t.assert.NoPanic(() => Words("x"));
  t.assert.JSONPath({ items: [{ name: "apple" }] }, "$.items[0].name", "apple");
}

// The hooks' memory is the app's (or the context file's): what Create
// stores there, a test reads back.
function TestMemory(t: testing.T, ctx: agent.Context) {
  ctx.memory.user.Set("visits", 2);
  t.assert.Equal(ctx.memory.user.Get("visits"), 2);
  ctx.memory.context.Set("scratch", { ok: true });
  t.assert.JSONPath(ctx.memory.context.Get("scratch"), "ok", true);
  t.assert.Equal(ctx.user_id, "test-user");
}

// A judge assistant decides what plain assertions cannot.
function TestJudge(t: testing.T, ctx: agent.Context) {
  t.assert.Agent("Hello! What is your name?", "tests.judge", {
    criteria: "The answer greets the user",
  });
}

// ctx.agent.Call runs another assistant's whole turn; ctx.llm.Stream calls
// a connector: scripted here, a real model when -c says so.
function TestModelCalls(t: testing.T, ctx: agent.Context) {
  const res = ctx.agent.Call("greeter", [{ role: "user", content: "Hi there" }]);
  t.assert.Nil(res.error);
  t.assert.Contains(res.content, "What is your name?");
  const llm = ctx.llm.Stream("scripted.greeter", [{ role: "user", content: "What's 2+2?" }]);
  t.assert.Equal(llm.content, "4");
}

function TestSkipped(t: testing.T, ctx: agent.Context) {
  t.skip("waiting for the new greeting rules");
  t.fail("never reached");
}
