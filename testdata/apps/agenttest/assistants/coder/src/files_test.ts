// A script test with the assistant's real sandbox: ctx.sandbox is the
// coder's container (or the context file's scripted one).
function TestSandboxFiles(t: testing.T, ctx: agent.Context) {
  ctx.sandbox.WriteFile("probe.txt", "probe\n");
  t.assert.Equal(ctx.sandbox.ReadFile("probe.txt"), "probe\n");
  const out = ctx.sandbox.Exec(["cat", "probe.txt"]);
  t.assert.Equal(out, "probe\n");
  t.assert.Equal(ctx.sandbox.workdir, "/workspace");
}
