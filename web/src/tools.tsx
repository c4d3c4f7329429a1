// Tool calls as people read them: a command as a command with its
// output, a file write as the file's code under its path, an edit as a
// diff, a search as its pattern; anything else as its named arguments.
// The shapes are recognised by their arguments, so the tools of every CLI
// (Claude Code, Codex, Gemini CLI, opencode, Cursor) and MCP servers show
// alike.
import { useMemo, useState } from "preact/hooks";
import type { ComponentChildren } from "preact";
import { diffStat, DiffLine, lineDiff, withContext } from "./diff";
import { Icon, IconName } from "./icons";
import { diffHTML, highlight, languageOf } from "./markdown";
import type { Msg } from "./turn";

type Args = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const first = (o: Args, ...keys: string[]) => {
  for (const k of keys) {
    const v = str(o[k]);
    if (v !== undefined) return v;
  }
  return undefined;
};

/** toolName splits an MCP tool's name (mcp__server__tool) into its
 * server and tool. */
export function toolName(name: string): { tool: string; server?: string } {
  const m = /^mcp__(.+?)__(.+)$/.exec(name);
  return m ? { tool: m[2], server: m[1] } : { tool: name };
}

/** shellCommand is a command without the shell wrapper a CLI put around
 * it (Codex runs /bin/bash -lc '...'). */
export function shellCommand(v: unknown): string | undefined {
  const c = Array.isArray(v) ? v.map(String).join(" ") : str(v);
  if (c === undefined) return undefined;
  const m = /^(?:\/(?:usr\/)?bin\/)?(?:ba|z)?sh -l?c '([\s\S]*)'$/.exec(c.trim());
  return m ? m[1].replace(/'\\''/g, "'") : c;
}

const pathOf = (o: Args) => first(o, "file_path", "filePath", "absolute_path", "path", "notebook_path", "target_file");
const shortPath = (p: string) => p.replace(/^\/workspace\//, "");

/** What a tool call shows: its summary line and its body. */
interface View {
  icon: IconName;
  verb: string;
  target?: string;
  stat?: { add: number; del: number };
  chips?: string[];
  body: (result?: Msg) => ComponentChildren;
  /** result says where the result shows: in the body, only when it is an
   * error (a file written), or under the body (the default). */
  result?: "body" | "quiet" | "show";
}

function describe(name: string, input: unknown, raw: string): View {
  const o: Args = input && typeof input === "object" && !Array.isArray(input) ? (input as Args) : {};
  const path = pathOf(o);
  const command = shellCommand(o.command ?? o.cmd);
  if (command !== undefined) {
    const chips: string[] = [];
    if (o.run_in_background === true || o.is_background === true) chips.push("background");
    return {
      icon: "terminal",
      verb: "Ran",
      target: command.split("\n")[0],
      chips,
      result: "body",
      body: (result) => <CommandView command={command} description={first(o, "description")} result={result} />,
    };
  }
  const content = first(o, "content", "fileText", "file_text", "contents");
  if (path && content !== undefined) {
    const lines = content === "" ? 0 : content.replace(/\n$/, "").split("\n").length;
    return {
      icon: "file",
      verb: "Wrote",
      target: shortPath(path),
      stat: { add: lines, del: 0 },
      result: "quiet",
      body: () => <FileView path={path} content={content} />,
    };
  }
  const oldText = first(o, "old_string", "oldString", "old_str");
  const newText = first(o, "new_string", "newString", "new_str");
  if (path && oldText !== undefined && newText !== undefined) {
    const lines = lineDiff(oldText, newText);
    return {
      icon: "edit",
      verb: "Edited",
      target: shortPath(path),
      stat: diffStat(lines),
      chips: o.replace_all === true ? ["every occurrence"] : [],
      result: "quiet",
      body: () => <DiffView lines={lines} path={path} />,
    };
  }
  if (path && Array.isArray(o.edits)) {
    const lines: DiffLine[] = [];
    o.edits.forEach((e, i) => {
      const ed = (e ?? {}) as Args;
      if (i > 0) lines.push({ kind: "hunk", text: "⋯" });
      lines.push(...lineDiff(first(ed, "old_string", "oldString") ?? "", first(ed, "new_string", "newString") ?? ""));
    });
    return { icon: "edit", verb: "Edited", target: shortPath(path), stat: diffStat(lines), result: "quiet", body: () => <DiffView lines={lines} path={path} /> };
  }
  if (Array.isArray(o.changes)) {
    const changes = o.changes as Args[];
    return {
      icon: "edit",
      verb: "Changed",
      target: changes.length === 1 ? shortPath(String(changes[0]?.path ?? "")) : `${changes.length} files`,
      result: "quiet",
      body: () => (
        <ul class="changes">
          {changes.map((c) => (
            <li key={String(c.path)}>
              <span class={"kind " + String(c.kind)}>{String(c.kind ?? "update")}</span> <code>{shortPath(String(c.path ?? ""))}</code>
            </li>
          ))}
        </ul>
      ),
    };
  }
  if (Array.isArray(o.todos)) {
    const todos = o.todos as Args[];
    return {
      icon: "check",
      verb: "Updated the plan",
      target: `${todos.filter((t) => t.status === "completed").length}/${todos.length} done`,
      result: "quiet",
      body: () => (
        <ul class="todos">
          {todos.map((t, i) => (
            <li key={i} class={String(t.status)}>
              <span class="box" aria-hidden="true">{t.status === "completed" ? "✓" : t.status === "in_progress" ? "▸" : ""}</span>
              {String(t.content ?? t.activeForm ?? "")}
            </li>
          ))}
        </ul>
      ),
    };
  }
  const pattern = first(o, "pattern", "glob", "regex");
  if (pattern !== undefined) {
    return { icon: "eye", verb: "Searched", target: pattern + (path ? " in " + shortPath(path) : ""), body: () => <Fields o={o} skip={["pattern"]} /> };
  }
  const query = first(o, "query", "url");
  if (query !== undefined && Object.keys(o).length <= 3) {
    return { icon: "eye", verb: o.url ? "Fetched" : "Searched the web for", target: query, body: () => <Fields o={o} skip={["query", "url"]} /> };
  }
  if (path && Object.keys(o).every((k) => ["file_path", "filePath", "absolute_path", "path", "offset", "limit", "notebook_path", "target_file"].includes(k))) {
    return {
      icon: "file",
      verb: "Read",
      target: shortPath(path),
      result: "body",
      body: (result) => (result ? <Output text={resultText(result)} lang={result.props.is_error ? undefined : languageOf(path)} /> : null),
    };
  }
  const { tool, server } = toolName(name);
  return {
    icon: "sandbox",
    verb: tool,
    target: server ? "· " + server : undefined,
    body: () => (input === undefined ? raw ? <Output text={raw} /> : null : <Fields o={o} />),
  };
}

/** resultText is a tool result's text (JSON for structured results). */
export function resultText(m: Msg): string {
  const c = m.props.content ?? m.text;
  if (typeof c === "string") return c;
  if (Array.isArray(c) && c.every((p) => p && typeof p === "object" && typeof p.text === "string")) return c.map((p) => p.text).join("\n");
  return JSON.stringify(c, null, 2);
}

export function ToolCall({ m, result }: { m: Msg; result?: Msg }) {
  const input = m.props.input;
  const name = String(m.props.name ?? "tool");
  const v = useMemo(() => describe(name, input, m.text), [name, input, m.text]);
  const state = !result ? (m.done ? "running" : "preparing") : result.props.is_error ? "failed" : "done";
  const failed = state === "failed";
  return (
    <details class={"msg tool " + state} data-tool={name}>
      <summary>
        <span class="tool-icon">
          <Icon name={v.icon} size={16} />
        </span>
        <span class="verb">{v.verb}</span>
        {v.target && <code class="target">{v.target}</code>}
        {v.stat && (v.stat.add > 0 || v.stat.del > 0) && (
          <span class="stat" aria-label={`${v.stat.add} lines added, ${v.stat.del} removed`}>
            {v.stat.add > 0 && <span class="add">+{v.stat.add}</span>}
            {v.stat.del > 0 && <span class="del">−{v.stat.del}</span>}
          </span>
        )}
        {v.chips?.map((c) => (
          <span key={c} class="chip">
            {c}
          </span>
        ))}
        <span class="state" title={"tool call " + state}>
          {state === "done" ? <Icon name="check" size={15} /> : failed ? "failed" : <span class="spinner" aria-label={"tool call " + state} />}
        </span>
      </summary>
      <div class="tool-body">
        {v.body(result)}
        {result && (v.result ?? "show") !== "body" && (failed || v.result !== "quiet") && (
          <div class={"result" + (failed ? " error" : "")}>
            <div class="label">{failed ? "Error" : "Result"}</div>
            <Output text={resultText(result)} />
          </div>
        )}
      </div>
    </details>
  );
}

function CommandView({ command, description, result }: { command: string; description?: string; result?: Msg }) {
  const out = result ? resultText(result) : "";
  return (
    <div class={"command" + (result?.props.is_error ? " failed" : "")}>
      {description && <div class="label">{description}</div>}
      <div class="console">
        <pre class="cmd">
          <span class="ps1" aria-hidden="true">$ </span>
          <code dangerouslySetInnerHTML={{ __html: highlight(command, "bash") }} />
        </pre>
        {out && <Output text={out} bare />}
      </div>
    </div>
  );
}

function FileView({ path, content }: { path: string; content: string }) {
  return (
    <div class="file-card">
      <div class="file-head">
        <Icon name="file" size={14} />
        <span class="path">{shortPath(path)}</span>
      </div>
      <Output text={content} lang={languageOf(path)} bare />
    </div>
  );
}

export function DiffView({ lines, path }: { lines: DiffLine[]; path: string }) {
  const html = useMemo(() => diffHTML(withContext(lines), languageOf(path)), [lines, path]);
  return (
    <div class="file-card">
      <div class="file-head">
        <Icon name="edit" size={14} />
        <span class="path">{shortPath(path)}</span>
      </div>
      <pre class="hljs diff">
        <code dangerouslySetInnerHTML={{ __html: html }} />
      </pre>
    </div>
  );
}

function Fields({ o, skip = [] }: { o: Args; skip?: string[] }) {
  const keys = Object.keys(o).filter((k) => !skip.includes(k));
  if (keys.length === 0) return null;
  return (
    <dl class="fields">
      {keys.map((k) => {
        const v = o[k];
        const s = typeof v === "string" ? v : JSON.stringify(v, null, 2);
        return (
          <div key={k}>
            <dt>{k}</dt>
            <dd>{s.includes("\n") || s.length > 80 ? <Output text={s} /> : <code>{s}</code>}</dd>
          </div>
        );
      })}
    </dl>
  );
}

// Long output is cut here until the reader asks for all of it.
const truncateAt = 2000;
const truncateLines = 40;

/** Output is text in a code box, cut to its first lines until the reader
 * asks for all of it, highlighted when its language is known. */
export function Output({ text, lang, bare }: { text: string; lang?: string; bare?: boolean }) {
  const [all, setAll] = useState(false);
  const cut = useMemo(() => {
    let end = text.length > truncateAt ? truncateAt : text.length;
    let n = 0;
    for (let i = 0; i < end; i++) {
      if (text.charCodeAt(i) === 10 && ++n === truncateLines) {
        end = i;
        break;
      }
    }
    return end < text.length ? end : -1;
  }, [text]);
  const shown = cut >= 0 && !all ? text.slice(0, cut) : text;
  const html = useMemo(() => (lang ? highlight(shown, lang) : undefined), [shown, lang]);
  return (
    <div class={"out" + (bare ? " bare" : "")}>
      {html !== undefined ? (
        <pre class="hljs">
          <code dangerouslySetInnerHTML={{ __html: html }} />
        </pre>
      ) : (
        <pre>{shown}</pre>
      )}
      {cut >= 0 && (
        <button type="button" class="link more" onClick={() => setAll(!all)} aria-expanded={all}>
          {all ? "Show less" : `Show all (${text.length.toLocaleString()} characters)`}
        </button>
      )}
    </div>
  );
}
