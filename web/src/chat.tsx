// One chat: its stored history, the turns streamed on this page (the
// answer as Markdown, thinking collapsed, tool calls with their arguments
// and results, notices, errors and usage), and the message box with its
// stop button.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import * as api from "./api";
import { renderMarkdown } from "./markdown";
import { apply, Msg, newTurn, Turn, toolResults, usageLine } from "./turn";

interface Props {
  chatId: string;
  info?: api.ChatInfo;
  assistants: api.Assistant[];
  onCreated: (id: string) => void;
  onChanged: () => void;
  onTool: () => void;
  onSkill: () => void;
  onError: (e: unknown) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A stream that drops is followed again from its last event, this often.
const maxResumes = 8;

export function ChatView({ chatId, info, assistants, onCreated, onChanged, onTool, onSkill, onError }: Props) {
  const [history, setHistory] = useState<api.Message[]>([]);
  const [turns, setTurns] = useState<Turn[]>([]);
  const turnsRef = useRef<Turn[]>([]);
  const [assistant, setAssistant] = useState(info?.assistant_id ?? "");
  const [text, setText] = useState("");
  const [stopping, setStopping] = useState(false);
  const live = useRef<AbortController | null>(null);
  const chatRef = useRef(chatId);
  const logRef = useRef<HTMLDivElement>(null);

  const running = turns.some((t) => t.running);
  const asst = assistant || info?.assistant_id || assistants[0]?.id || "";

  const setTurnsNow = (f: (ts: Turn[]) => Turn[]) => {
    turnsRef.current = f(turnsRef.current);
    setTurns(turnsRef.current);
  };
  const turnOf = (key: string) => turnsRef.current.find((t) => t.key === key);
  const failTurn = (key: string, code: string, message: string) =>
    setTurnsNow((ts) =>
      ts.map((t) =>
        t.key === key
          ? {
              ...t,
              running: false,
              msgs: [...t.msgs.map((m) => ({ ...m, done: true })), { id: "page-error-" + t.msgs.length, type: "error", text: message, props: { code, message }, done: true }],
            }
          : t,
      ),
    );

  // drive streams a turn's events until its done event, following the
  // chat's event stream again after the connection drops.
  const drive = async (key: string, chat: string, first: (on: api.OnEvent, s: AbortSignal) => Promise<void>) => {
    const ctrl = new AbortController();
    live.current = ctrl;
    const onEvent: api.OnEvent = (ev, id) => {
      setTurnsNow((ts) => ts.map((t) => (t.key === key ? apply(t, ev, id) : t)));
      if (ev.type === "tool_result" || ev.event === "done") onTool();
      if (ev.type === "skill_proposed" && ev.event === "start") onSkill();
    };
    let go = first;
    for (let attempt = 0; ; attempt++) {
      try {
        await go(onEvent, ctrl.signal);
      } catch (e) {
        if (ctrl.signal.aborted) return;
        if (e instanceof api.ApiError && e.code === "canceled") {
          // Stopped before it sent anything.
          setTurnsNow((ts) => ts.map((t) => (t.key === key ? { ...t, running: false, final: { usage: { input_tokens: 0, output_tokens: 0 }, error: "canceled" } } : t)));
          break;
        }
        if (e instanceof api.ApiError) {
          if (e.status === 401) onError(e);
          failTurn(key, e.code, e.status === 404 && attempt > 0 ? "The turn's events are gone: the history has what it saved." : e.message);
          break;
        }
        // A network error: follow the stream again below.
      }
      const t = turnOf(key);
      if (!t || !t.running || ctrl.signal.aborted) break;
      if (attempt >= maxResumes) {
        failTurn(key, "network", "Lost the connection to the server.");
        break;
      }
      await sleep(Math.min(300 * 2 ** attempt, 5000));
      const last = turnOf(key)?.lastEventId ?? "";
      go = (on, s) => api.followTurn(chat, last, on, s);
    }
    if (live.current === ctrl) live.current = null;
    setStopping(false);
    onChanged();
  };

  useEffect(() => {
    chatRef.current = chatId;
    if (!chatId) return;
    let gone = false;
    api
      .getChat(chatId)
      .then((d) => {
        if (gone) return;
        setHistory(d.history);
        if (d.assistant_id) setAssistant(d.assistant_id);
        if (d.turn?.running && !turnsRef.current.some((t) => t.running)) {
          const key = "resume-" + d.turn.id;
          setTurnsNow((ts) => [...ts, newTurn(key, d.turn!.prompt)]);
          drive(key, chatId, (on, s) => api.followTurn(chatId, "", on, s));
        }
      })
      .catch((e) => {
        if (!(e instanceof api.ApiError && e.status === 404)) onError(e);
      });
    return () => {
      gone = true;
      live.current?.abort();
    };
  }, [chatId]);

  // Keep the newest output in view while the reader is at the bottom.
  useEffect(() => {
    const el = logRef.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  }, [turns, history]);

  const send = async () => {
    const msg = text.trim();
    if (!msg || running || !asst) return;
    let chat = chatId;
    if (!chat) {
      chat = api.newChatID();
      chatRef.current = chat;
      onCreated(chat);
    }
    setText("");
    const key = "t-" + Date.now();
    setTurnsNow((ts) => [...ts, newTurn(key, msg)]);
    setTimeout(onChanged, 500);
    await drive(key, chat, (on, s) => api.startTurn(asst, chat, msg, on, s));
  };

  const stop = async () => {
    if (!chatId) return;
    setStopping(true);
    try {
      await api.cancelTurn(chatId);
    } catch (e) {
      setStopping(false);
      onError(e);
    }
  };

  const current = assistants.find((a) => a.id === asst);
  return (
    <div class="chatview">
      <div class="log" ref={logRef} role="log" aria-live="polite" aria-label="Conversation">
        {!chatId && turns.length === 0 && <p class="hint">Choose an assistant and send a message to start a chat.</p>}
        {history.map((m, i) => (
          <HistoryMessage key={"h" + i} m={m} />
        ))}
        {turns.map((t) => (
          <TurnView key={t.key} turn={t} />
        ))}
      </div>
      <form
        class="composer"
        onSubmit={(e) => {
          e.preventDefault();
          send();
        }}
      >
        <div class="row">
          <label for="assistant">Assistant</label>
          {history.length === 0 && turns.length === 0 ? (
            <select id="assistant" value={asst} onChange={(e) => setAssistant(e.currentTarget.value)}>
              {assistants.map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name}
                  {a.sandboxed ? " (sandbox)" : ""}
                </option>
              ))}
            </select>
          ) : (
            <span id="assistant" class="assistant">
              {current?.name ?? asst}
            </span>
          )}
        </div>
        <textarea
          aria-label="Message"
          placeholder="Message (Enter sends, Shift+Enter adds a line, Escape stops)"
          value={text}
          rows={3}
          onInput={(e) => setText(e.currentTarget.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              send();
            } else if (e.key === "Escape" && running) {
              e.preventDefault();
              stop();
            }
          }}
        />
        <div class="row end">
          {running ? (
            <button type="button" class="stop" onClick={stop} disabled={stopping} aria-label="Stop the running turn">
              {stopping ? "Stopping…" : "Stop"}
            </button>
          ) : (
            <button type="submit" class="primary" disabled={!text.trim() || !asst}>
              Send
            </button>
          )}
        </div>
      </form>
    </div>
  );
}

function HistoryMessage({ m }: { m: api.Message }) {
  if (m.role === "user") return <div class="msg user">{m.content}</div>;
  if (m.role === "assistant") return <Markdown class="msg answer" text={m.content} />;
  return null;
}

function Markdown({ text, class: cls }: { text: string; class: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class={cls + " md"} dangerouslySetInnerHTML={{ __html: html }} />;
}

function TurnView({ turn }: { turn: Turn }) {
  const results = toolResults(turn);
  const shown = new Set<string>();
  for (const m of turn.msgs) if (m.type === "tool_call" && m.props.id) shown.add(String(m.props.id));
  return (
    <section class="turn" aria-busy={turn.running}>
      {turn.prompt !== undefined && <div class="msg user">{turn.prompt || "…"}</div>}
      {turn.msgs.map((m) => {
        if (m.type === "tool_result" && shown.has(String(m.props.tool_call_id))) return null;
        return <MsgView key={m.id} m={m} result={m.type === "tool_call" ? results.get(String(m.props.id)) : undefined} />;
      })}
      {turn.running && !turn.msgs.some((m) => !m.done) && (
        <div class="working" role="status">
          Working…
        </div>
      )}
      {turn.final && (
        <div class={"usage" + (turn.final.error ? " failed" : "")} aria-label="Usage of this turn">
          {turn.final.error === "canceled" ? "Stopped · " : turn.final.error ? `Failed (${turn.final.error}) · ` : ""}
          {usageLine(turn.final)}
        </div>
      )}
    </section>
  );
}

function MsgView({ m, result }: { m: Msg; result?: Msg }) {
  switch (m.type) {
    case "text":
      return <Markdown class="msg answer" text={m.text} />;
    case "thinking":
      return (
        <details class="msg thinking">
          <summary>Thinking{m.done ? "" : "…"}</summary>
          <div class="body">{m.text}</div>
        </details>
      );
    case "tool_call":
      return <ToolCall m={m} result={result} />;
    case "tool_result":
      return (
        <details class="msg tool" open>
          <summary>Tool result</summary>
          <Truncated text={resultText(m)} />
        </details>
      );
    case "loading":
      return m.done ? null : (
        <div class="msg loading" role="status">
          {m.props.message ?? m.text}
        </div>
      );
    case "error":
      return (
        <div class="msg error" role="alert">
          <strong>Error{m.props.code ? ` (${m.props.code})` : ""}:</strong> {m.props.message ?? m.text}
        </div>
      );
    case "notice":
      return (
        <div class="msg notice">
          {m.props.message ?? m.text}
          {m.props.suggested_action ? <div class="meta">Suggested: {String(m.props.suggested_action)}</div> : null}
        </div>
      );
    case "skill_proposed":
      return (
        <div class="msg skill" role="note">
          <strong>Skill proposed: {m.props.name}</strong> — {m.props.description}
          <div class="meta">
            It is not used until you approve it{m.props.test ? "; a test turn tries it after this turn" : ""}.{" "}
            <a href={"#/skills/" + encodeURIComponent(String(m.props.proposal_id))}>Review it</a>
          </div>
        </div>
      );
    case "session":
      return (
        <div class="msg session">
          Session {m.props.model ? `· ${m.props.model}` : ""} {m.props.session_id ? `· ${String(m.props.session_id).slice(0, 8)}` : ""}
        </div>
      );
    default:
      return (
        <div class="msg custom">
          <span class="type">{m.type}</span> {m.text}
        </div>
      );
  }
}

/** The tool's most telling argument, shown next to its name. */
function preview(input: unknown): string {
  if (!input || typeof input !== "object") return "";
  const o = input as Record<string, unknown>;
  for (const k of ["command", "file_path", "path", "pattern", "url", "query", "description"]) {
    if (typeof o[k] === "string") return String(o[k]).split("\n")[0].slice(0, 120);
  }
  return "";
}

function resultText(m: Msg): string {
  const c = m.props.content ?? m.text;
  if (typeof c === "string") return c;
  return JSON.stringify(c, null, 2);
}

function ToolCall({ m, result }: { m: Msg; result?: Msg }) {
  const input = m.props.input;
  const state = !result ? (m.done ? "running" : "preparing") : result.props.is_error ? "failed" : "done";
  return (
    <details class={"msg tool " + state}>
      <summary>
        <span class="name">{m.props.name ?? "tool"}</span> <code class="preview">{preview(input)}</code>{" "}
        <span class="state" aria-label={"tool call " + state}>
          {state === "done" ? "✓" : state === "failed" ? "✗" : "…"}
        </span>
      </summary>
      <div class="body">
        <h4>Arguments</h4>
        <Truncated text={input === undefined ? m.text : JSON.stringify(input, null, 2)} />
        {result && (
          <>
            <h4>{result.props.is_error ? "Error" : "Result"}</h4>
            <Truncated text={resultText(result)} />
          </>
        )}
      </div>
    </details>
  );
}

// Long output is cut here until the reader asks for all of it.
const truncateAt = 2000;

function Truncated({ text }: { text: string }) {
  const [all, setAll] = useState(false);
  const long = text.length > truncateAt;
  return (
    <div class="out">
      <pre>{long && !all ? text.slice(0, truncateAt) + "\n…" : text}</pre>
      {long && (
        <button type="button" class="link" onClick={() => setAll(!all)} aria-expanded={all}>
          {all ? "Show less" : `Show all (${text.length.toLocaleString()} characters)`}
        </button>
      )}
    </div>
  );
}
