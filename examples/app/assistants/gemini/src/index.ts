// Hooks of this assistant: the coder's (assistants/coder/src/index.ts) in
// brief. Create makes the workspace a git repository; Next commits what
// the agent changed; Remember is the host tool "remember".

function Create(ctx: any, messages: any[], options: any) {
  if (!ctx.sandbox) {
    return { messages };
  }
  const files: any[] = ctx.sandbox.ListDir(".");
  if (!files.some((f) => f.name === ".git")) {
    ctx.sandbox.Exec(["git", "init", "--quiet"]);
    // Keep agentbox's per-run files (CLI configuration, skills) out of the
    // history.
    ctx.sandbox.WriteFile(".gitignore", ".agentbox/\ntmp/\n");
  }
  ctx.Send({ type: "notice", props: { code: "workspace_ready", message: `Workspace ready (${files.length} entries)` } });
  return { messages };
}

function Next(ctx: any, payload: any, options: any) {
  if (payload.error || !ctx.sandbox) {
    return null;
  }
  const status = ctx.sandbox.Exec(["git", "status", "--porcelain"]).trim();
  if (status === "") {
    return null;
  }
  const changed = status.split("\n").length;
  const files = changed === 1 ? "1 file" : `${changed} files`;
  ctx.sandbox.Exec(["git", "add", "--all"]);
  ctx.sandbox.Exec(["git", "-c", "user.name=agentbox", "-c", "user.email=agentbox@localhost", "commit", "--quiet", "-m", `agentbox: turn changes (${files})`]);
  const head = ctx.sandbox.Exec(["git", "rev-parse", "--short", "HEAD"]).trim();
  ctx.memory.chat.Set("last_commit", head);
  ctx.Send({ type: "notice", props: { code: "committed", message: `Committed ${files} as ${head}` } });
  return null;
}

function Remember(ctx: any, args: { note: string }) {
  const notes: string[] = ctx.memory.chat.Get("notes") || [];
  notes.push(args.note);
  ctx.memory.chat.Set("notes", notes);
  return { saved: true, notes };
}
