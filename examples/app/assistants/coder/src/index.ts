// Hooks of the coder assistant (adapted from the design seed, section 4.6).
// They run in agentbox's embedded JS engine; ctx.sandbox works on the
// chat's workspace inside the sandbox (node, git, bash, coreutils).

interface FileInfo {
  name: string;
  size: number;
  is_dir: boolean;
  mod_time: string;
}

/**
 * Create runs after the sandbox is created and before the coding agent:
 * it makes sure the workspace is a git repository so every turn's changes
 * can be committed, and reports progress to the client.
 */
function Create(ctx: any, messages: any[], options: any) {
  if (!ctx.sandbox) {
    return { messages };
  }

  const loadingId = ctx.SendStream({
    type: "loading",
    props: { message: "Checking the workspace..." },
  });

  try {
    const nodeVersion = ctx.sandbox.Exec(["node", "--version"]).trim();
    log.Info(`Node.js version: ${nodeVersion}`);
  } catch (e: any) {
    log.Error(`Node.js not available: ${e.message}`);
    ctx.End(loadingId);
    throw new Error("Node.js is required in the sandbox image");
  }

  const files: FileInfo[] = ctx.sandbox.ListDir(".");
  if (!files.some((f) => f.name === ".git")) {
    ctx.sandbox.Exec(["git", "init", "--quiet"]);
    // Keep agentbox's per-run files (CLI config, MCP config, skills) out of
    // the history.
    ctx.sandbox.WriteFile(".gitignore", ".agentbox/\n.claude/\n.mcp.json\ntmp/\n");
    log.Info("Initialized a git repository in the workspace");
  }
  log.Debug(`Workspace files: ${files.map((f) => f.name).join(", ")}`);

  ctx.Replace(loadingId, {
    type: "loading",
    props: { message: `Workspace ready (${files.length} entries)` },
  });
  ctx.End(loadingId);

  return { messages };
}

/**
 * Next runs after the coding agent, before the sandbox is removed: it
 * commits what the agent changed, so the workspace history shows each
 * turn, and remembers the commit for the chat.
 */
function Next(ctx: any, payload: any, options: any) {
  const { error } = payload;
  if (error || !ctx.sandbox) {
    return null;
  }

  let status: string;
  try {
    status = ctx.sandbox.Exec(["git", "status", "--porcelain"]);
  } catch (e: any) {
    log.Warn(`not a git repository, nothing committed: ${e.message}`);
    return null;
  }
  if (status.trim() === "") {
    log.Debug("No changes to commit");
    return null;
  }
  const changed = status.trim().split("\n").length;
  const files = changed === 1 ? "1 file" : `${changed} files`;
  try {
    ctx.sandbox.Exec(["git", "add", "--all"]);
    ctx.sandbox.Exec(["git", "-c", "user.name=agentbox", "-c", "user.email=agentbox@localhost", "commit", "--quiet", "-m", `agentbox: turn changes (${files})`]);
    const head = ctx.sandbox.Exec(["git", "rev-parse", "--short", "HEAD"]).trim();
    ctx.memory.chat.Set("last_commit", head);
    ctx.Send({
      type: "notice",
      props: { code: "committed", message: `Committed ${files} as ${head}` },
    });
    log.Info(`Committed ${head}`);
  } catch (e: any) {
    log.Warn(`git commit skipped: ${e.message}`);
  }

  // Clean up temporary files the agent may have left.
  try {
    ctx.sandbox.Exec(["rm", "-rf", "tmp/"]);
  } catch (e) {
    // ignore
  }
  return null; // keep the agent's response
}

/**
 * Remember is the host tool "remember" (see package.yao): the agent calls
 * it from the sandbox, and it runs here on the host with the request's
 * ctx. Notes live in the chat's memory, so later turns can read them.
 */
function Remember(ctx: any, args: { note: string }) {
  const notes: string[] = ctx.memory.chat.Get("notes") || [];
  notes.push(args.note);
  ctx.memory.chat.Set("notes", notes);
  log.Info(`remembered a note for chat ${ctx.chat_id}`);
  return { saved: true, notes };
}
