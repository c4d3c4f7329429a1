// Script tests that must not pass, one per way: agentbox's own tests run
// this file with -i and check each outcome. It is outside src/, so a plain
// `agentbox test` does not pick it up.
import { Greeting } from "../src/format";

function TestAssertFails(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(Greeting("Ada"), "Hi, Ada", "greets by name");
  t.log("a failed assertion lets the test go on");
}

function TestFatal(t: testing.T, ctx: agent.Context) {
  t.fatal("cannot go on");
  t.log("never logged");
}

function TestThrows(t: testing.T, ctx: agent.Context) {
  const x: any = null;
  x.boom();
}

function TestErrorf(t: testing.T, ctx: agent.Context) {
  t.error("a soft failure");
  t.assert.True(true);
}

// Yao's processes, models and tables do not exist here: a test that needs
// them is skipped with a YAO_ONLY reason.
function TestYaoOnly(t: testing.T, ctx: agent.Context) {
  const users = Process("models.user.Get", { limit: 1 });
  t.assert.Greater(users.length, 0);
}

function TestYaoOnlyCaught(t: testing.T, ctx: agent.Context) {
  let fetched = false;
  try {
    http.Get("https://example.com");
    fetched = true;
  } catch (e) {}
  t.assert.True(fetched, "fetched the page");
}

function TestJudgeFails(t: testing.T, ctx: agent.Context) {
  t.assert.Agent("Hello", "tests.judge", { criteria: "The answer quotes a price" });
}

function TestRunsForever(t: testing.T, ctx: agent.Context) {
  for (;;) {}
}
