// A hook written against agentbox.d.ts with strict type checking: it uses
// every part of the ctx API. jsapi's tests run it; `tsc -p` checks it.
import { summarize } from "./summary";

interface Visit {
  count: number;
  last: string;
}

export function Create(ctx: Context, messages: Message[], options: CreateOptions): CreateResult | null {
  const visit = ctx.memory.user.Get<Visit>("visit") ?? { count: 0, last: "" };
  visit.count++;
  visit.last = ctx.chat_id;
  ctx.memory.user.Set("visit", visit);
  ctx.memory.chat.Set("locale", ctx.locale);
  ctx.memory.context.Set("started", messages.length);

  const id = ctx.SendStream({ type: "loading", props: { message: "Checking the workspace" } });
  let files: FileInfo[] = [];
  if (ctx.sandbox) {
    ctx.sandbox.WriteFile("notes/plan.md", `# Plan for ${ctx.user_id}\n`);
    files = ctx.sandbox.ListDir("notes");
    try {
      ctx.sandbox.Exec(["sh", "-c", "exit 2"], { cwd: "notes", timeout: 5000, env: { A: "1" } });
    } catch (e) {
      const err = e as ExecError;
      log.Warn("exit", err.code, err.exit_code, err.stderr);
    }
  }
  ctx.Append(id, ".");
  ctx.Replace(id, { type: "text", props: { content: `Workspace has ${files.length} note(s)` } });
  ctx.End(id);
  console.log("visit", visit.count, ctx.metadata["plan"] ?? "none");

  const sandbox = options.sandbox ?? {};
  return {
    messages: [...messages, { role: "system", content: summarize(visit.count, files.map((f) => f.name)) }],
    options: { temperature: 0.1, sandbox: { arguments: { ...sandbox.arguments, max_turns: 4 } } },
  };
}

export function Next(ctx: Context, payload: NextPayload): NextResult | null {
  if (payload.error !== null) {
    return null;
  }
  const tools = payload.tools.filter((t: ToolCall) => !t.is_error).map((t) => t.name);
  return {
    data: {
      answer: payload.completion,
      tools,
      started: ctx.memory.context.Get<number>("started"),
      visits: ctx.memory.user.Get<Visit>("visit")?.count,
      keys: ctx.memory.user.Keys(),
      has: ctx.memory.chat.Has("locale"),
    },
  };
}
