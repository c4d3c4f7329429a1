// Script tests run with tests/context.json: a scripted memory and sandbox.
function TestScriptedContext(t: testing.T, ctx: agent.Context) {
  t.assert.Equal(ctx.user_id, "ctx-user");
  t.assert.Equal(ctx.locale, "fr-fr");
  t.assert.Equal(ctx.metadata.plan, "pro");
  t.assert.Equal(ctx.authorized.team_id, "ctx-team");
  t.assert.Equal(ctx.memory.user.Get("visits"), 41);
  t.assert.Equal(ctx.memory.chat.Get("turns"), 7);
  t.assert.Equal(ctx.sandbox.ReadFile("notes/todo.txt"), "buy milk\n");
  t.assert.Equal(ctx.sandbox.Exec(["git", "status", "--short"]), " M notes/todo.txt\n");
  let err: any = null;
  try {
    ctx.sandbox.Exec(["npm", "test"]);
  } catch (e) {
    err = e;
  }
  t.assert.Equal(err && err.code, "EXEC_FAILED");
  t.assert.Equal(err && err.stderr, "1 failing");
  ctx.sandbox.WriteFile("out.txt", "done");
  t.assert.Len(ctx.sandbox.ListDir("."), 2, "notes/ and out.txt");
}
