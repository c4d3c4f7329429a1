// One chat: its stored history, the turns streamed on this page (the
// answer as Markdown, thinking collapsed, tool calls as commands, files
// and diffs, progress while the sandbox starts, notices, errors and
// usage), and the message box with image attach and the stop button. A
// new chat starts on the assistants' cards.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import * as api from "./api";
import { agentName, Broken, Home } from "./home";
import { Icon } from "./icons";
import { copyCode, renderMarkdown } from "./markdown";
import { ApprovalCard } from "./approval";
import { ToolCall } from "./tools";
import { apply, Msg, newTurn, timingsLine, Turn, toolResults, usageLine } from "./turn";

interface Props {
  chatId: string;
  info?: api.ChatInfo;
  assistants: api.Assistant[];
  /** selected is the assistant a new chat starts with. */
  selected: string;
  onSelect: (id: string) => void;
  onCreated: (id: string) => void;
  /** onOpen shows another chat (a fork). */
  onOpen: (id: string) => void;
  onChanged: () => void;
  onTool: () => void;
  onSkill: () => void;
  onError: (e: unknown) => void;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// A stream that drops is followed again from its last event, this often.
const maxResumes = 8;

export function ChatView({ chatId, info, assistants, selected, onSelect, onCreated, onOpen, onChanged, onTool, onSkill, onError }: Props) {
  const [history, setHistory] = useState<api.Message[]>([]);
  const [turns, setTurns] = useState<Turn[]>([]);
  const turnsRef = useRef<Turn[]>([]);
  const [owner, setOwner] = useState(info?.assistant_id ?? "");
  const [text, setText] = useState("");
  const [images, setImages] = useState<string[]>([]);
  const [stopping, setStopping] = useState(false);
  // reloads counts the rewinds: the history is loaded again after each.
  const [reloads, setReloads] = useState(0);
  const [branching, setBranching] = useState(false);
  // versions are the versions of each turn of the chat's current branch
  // (edited messages, turns after a rewind), by turn.
  const [versions, setVersions] = useState<Map<number, api.TurnVersions>>(new Map());
  const live = useRef<AbortController | null>(null);
  // own is the chat this view started: its turn is on the page already.
  const own = useRef("");
  const logRef = useRef<HTMLDivElement>(null);

  const running = turns.some((t) => t.running);
  const asst = owner || info?.assistant_id || selected || (assistants.find((a) => a.available) ?? assistants[0])?.id || "";
  const empty = !chatId && turns.length === 0;

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
  // chat's event stream again after the connection drops. It returns the
  // API's error when the turn was refused before it started.
  const drive = async (key: string, chat: string, first: (on: api.OnEvent, s: AbortSignal) => Promise<void>): Promise<api.ApiError | null> => {
    const ctrl = new AbortController();
    live.current = ctrl;
    let refused: api.ApiError | null = null;
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
        if (ctrl.signal.aborted) return null;
        if (e instanceof api.ApiError && e.code === "canceled") {
          // Stopped before it sent anything.
          setTurnsNow((ts) => ts.map((t) => (t.key === key ? { ...t, running: false, final: { usage: { input_tokens: 0, output_tokens: 0 }, error: "canceled" } } : t)));
          break;
        }
        if (e instanceof api.ApiError) {
          if (e.status === 401) onError(e);
          if (attempt === 0 && e.status < 500) refused = e;
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
    return refused;
  };

  useEffect(() => {
    if (!chatId || (chatId === own.current && reloads === 0)) return;
    let gone = false;
    api
      .getChat(chatId)
      .then((d) => {
        if (gone) return;
        setHistory(d.history);
        loadVersions(chatId);
        if (d.assistant_id) setOwner(d.assistant_id);
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
    };
  }, [chatId, reloads]);

  // Leaving the chat stops following its turn (which runs on, detached).
  useEffect(() => () => live.current?.abort(), []);

  // Keep the newest output in view while the reader is at the bottom.
  useEffect(() => {
    const el = logRef.current;
    if (el && el.scrollHeight - el.scrollTop - el.clientHeight < 160) el.scrollTop = el.scrollHeight;
  }, [turns, history]);

  // loadVersions reads the versions of the chat's turns (none on a server
  // that keeps no checkpoints).
  const loadVersions = (chat: string) =>
    api
      .branches(chat)
      .then((bs) => setVersions(new Map(bs.map((b) => [b.turn, b]))))
      .catch(() => setVersions(new Map()));

  // reload shows the chat as stored, after a rewind, a switch or an edit.
  const reload = () => {
    setTurnsNow(() => []);
    setReloads((r) => r + 1);
    onChanged();
    onTool();
  };

  // resend sends an edited user message of turn n (from 1) again: the
  // chat goes back to the state before that turn, the old turns stay as
  // another version.
  const resend = async (n: number, msg: string) => {
    if (!chatId || running || branching || !msg.trim() || !asst) return;
    const cut = userIndex(history, n);
    setHistory((h) => h.slice(0, cut));
    const key = "t-" + Date.now();
    setTurnsNow(() => [newTurn(key, msg.trim())]);
    const refused = await drive(key, chatId, (on, s) => api.startTurn(asst, chatId, msg.trim(), on, s, n));
    if (refused) onError(refused);
    reload();
  };

  // switchTo shows version v (from 1) of turn n.
  const switchTo = async (n: number, v: number) => {
    if (!chatId || running || branching) return;
    setBranching(true);
    try {
      await api.switchBranch(chatId, n, v);
      reload();
    } catch (e) {
      onError(e);
    } finally {
      setBranching(false);
    }
  };

  const send = async () => {
    const msg = text.trim();
    if (running && chatId) return say(msg);
    if ((!msg && images.length === 0) || running || !asst) return;
    let chat = chatId;
    if (!chat) {
      chat = api.newChatID();
      own.current = chat;
      onCreated(chat);
    }
    const sent = images;
    setText("");
    setImages([]);
    const key = "t-" + Date.now();
    setTurnsNow((ts) => [...ts, newTurn(key, msg, sent)]);
    setTimeout(onChanged, 500);
    const refused = await drive(key, chat, (on, s) => api.startTurn(asst, chat, api.userMessage(msg, sent), on, s));
    if (refused) {
      // Nothing ran: the message goes back into the box to change and send again.
      setText((t) => (t.trim() ? t : msg));
      setImages((i) => (i.length ? i : sent));
    }
  };

  // say sends a message into the running turn: the agent reads it before
  // its next step, and the turn's stream shows it where it came.
  const say = async (msg: string) => {
    if (!msg) return;
    if (images.length) {
      onError(new Error("Images go with a new message: send them when the agent is done, or remove them."));
      return;
    }
    setText("");
    try {
      await api.sayToTurn(chatId, msg);
    } catch (e) {
      setText((t) => (t.trim() ? t : msg));
      onError(e);
    }
  };

  // interrupt stops the running turn's current step; the chat goes on.
  const interrupt = async () => {
    if (!chatId) return;
    try {
      await api.interruptTurn(chatId);
    } catch (e) {
      onError(e);
    }
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

  // rewind brings the chat back to turn n; fork opens a new chat from it.
  const branch = async (n: number, how: "rewind" | "fork") => {
    if (!chatId || running || branching) return;
    setBranching(true);
    try {
      if (how === "fork") {
        const f = await api.forkChat(chatId, n);
        onChanged();
        onOpen(f.chat_id);
        return;
      }
      await api.rewindChat(chatId, n);
      reload();
    } catch (e) {
      onError(e);
    } finally {
      setBranching(false);
    }
  };

  // The turn each stored answer ends (its user messages counted from 1),
  // and the turn of each user message.
  const [turnOf_, userTurn] = useMemo(() => {
    const out: number[] = [];
    const users: number[] = [];
    let n = 0;
    history.forEach((m, i) => {
      if (m.role === "user") n++;
      users.push(m.role === "user" ? n : 0);
      const next = history.slice(i + 1).find((x) => x.role === "user" || (x.role === "assistant" && (x.content || x.error)));
      out.push(m.role === "assistant" && (m.content || m.error) && (!next || next.role === "user") ? n : 0);
    });
    return [out, users];
  }, [history]);

  const current = assistants.find((a) => a.id === asst);
  return (
    <div class="chatview">
      <div class="log" ref={logRef} role="log" aria-live="polite" aria-label="Conversation">
        {empty ? (
          <Home
            assistants={assistants}
            selected={asst}
            onSelect={onSelect}
            onPrompt={(p) => {
              setText(p);
              document.getElementById("message")?.focus();
            }}
          />
        ) : (
          <div class="thread" onClick={copyCode}>
            {current && !current.available && <Broken a={current} />}
            {history.map((m, i) => (
              <HistoryMessage
                key={"h" + i}
                m={m}
                turn={turnOf_[i]}
                userTurn={userTurn[i]}
                versions={versions.get(userTurn[i])}
                busy={running || branching}
                onBranch={branch}
                onResend={resend}
                onSwitch={switchTo}
              />
            ))}
            {turns.map((t) => (
              <TurnView key={t.key} turn={t} command={current?.command} chat={chatId} />
            ))}
          </div>
        )}
      </div>
      <Composer
        text={text}
        setText={setText}
        images={images}
        setImages={setImages}
        running={running}
        stopping={stopping}
        disabled={!asst || current?.available === false}
        placeholder={
          current?.available === false
            ? `${current.name} does not run: its files have errors`
            : running
              ? "Tell the agent something while it works"
              : current
                ? `Message ${current.name}`
                : "Message"
        }
        onSend={send}
        onStop={stop}
        onInterrupt={interrupt}
        onError={onError}
      />
    </div>
  );
}

interface HistoryProps {
  m: api.Message;
  /** turn is the turn this answer ends (0: none), busy disables its actions. */
  turn: number;
  /** userTurn is the turn of a user message (0: not one), versions its turn's versions. */
  userTurn: number;
  versions?: api.TurnVersions;
  busy: boolean;
  onBranch: (turn: number, how: "rewind" | "fork") => void;
  onResend: (turn: number, text: string) => void;
  onSwitch: (turn: number, version: number) => void;
}

/** userIndex is the index in history of the user message of turn n (from 1). */
function userIndex(history: api.Message[], n: number): number {
  let seen = 0;
  const i = history.findIndex((m) => m.role === "user" && ++seen === n);
  return i < 0 ? history.length : i;
}

function HistoryMessage({ m, turn, userTurn, versions, busy, onBranch, onResend, onSwitch }: HistoryProps) {
  if (m.role === "user") return <UserMessage m={m} turn={userTurn} versions={versions} busy={busy} onResend={onResend} onSwitch={onSwitch} />;
  if (m.role !== "assistant" || (!m.content && !m.error && !m.said?.length)) return null;
  return (
    <>
      {splitSaid(m).map((part, i) =>
        part.said ? (
          <div key={i} class="msg user said">
            {part.text}
          </div>
        ) : (
          part.text && <Markdown key={i} class="msg answer" text={part.text} />
        ),
      )}
      {m.error && <ErrorBox code={m.error.code} message={m.error.message} />}
      {turn > 0 && (
        <div class="turn-actions" role="group" aria-label={`Turn ${turn}`}>
          <button
            type="button"
            disabled={busy}
            title="Bring the chat back to here: files, session and messages (later turns are kept)"
            aria-label={`Rewind to turn ${turn}`}
            onClick={() => onBranch(turn, "rewind")}
          >
            Rewind here
          </button>
          <button type="button" disabled={busy} title="A new chat from here, with a copy of the files" aria-label={`Fork at turn ${turn}`} onClick={() => onBranch(turn, "fork")}>
            Fork
          </button>
        </div>
      )}
    </>
  );
}

/** splitSaid is a stored answer in the order it happened: its text, with
 * the messages its user sent while it ran (said, at byte offsets of the
 * text) where they came. */
function splitSaid(m: api.Message): { text: string; said?: boolean }[] {
  if (!m.said?.length) return [{ text: m.content }];
  const bytes = new TextEncoder().encode(m.content);
  const dec = new TextDecoder();
  const out: { text: string; said?: boolean }[] = [];
  let from = 0;
  for (const s of m.said) {
    const at = Math.min(Math.max(s.at, from), bytes.length);
    out.push({ text: dec.decode(bytes.subarray(from, at)).trim() }, { text: s.content, said: true });
    from = at;
  }
  out.push({ text: dec.decode(bytes.subarray(from)).trim() });
  return out;
}

/** UserMessage is a stored user message with its actions: edit and send
 * again (a new version of its turn), and "< 2/3 >" among the versions. */
function UserMessage({
  m,
  turn,
  versions,
  busy,
  onResend,
  onSwitch,
}: {
  m: api.Message;
  turn: number;
  versions?: api.TurnVersions;
  busy: boolean;
  onResend: (turn: number, text: string) => void;
  onSwitch: (turn: number, version: number) => void;
}) {
  const [editing, setEditing] = useState<string | null>(null);
  const n = versions?.versions.length ?? 0;
  const cur = (versions?.current ?? 0) + 1;
  if (editing !== null) {
    const submit = () => {
      if (!editing.trim()) return;
      setEditing(null);
      onResend(turn, editing);
    };
    return (
      <form
        class="msg user editing"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <textarea
          aria-label={`Edit message ${turn}`}
          value={editing}
          rows={Math.min(10, editing.split("\n").length + 1)}
          ref={(el) => el?.focus()}
          onInput={(e) => setEditing((e.target as HTMLTextAreaElement).value)}
          onKeyDown={(e) => {
            if (e.key === "Escape") setEditing(null);
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              submit();
            }
          }}
        />
        <div class="edit-actions">
          <button type="button" onClick={() => setEditing(null)}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy || !editing.trim()}>
            Send
          </button>
        </div>
      </form>
    );
  }
  return (
    <div class="user-turn">
      <UserBubble text={m.content} images={imagesOf(m)} />
      {turn > 0 && (
        <div class="user-actions" role="group" aria-label={`Message ${turn}`}>
          {n > 1 && (
            <span class="versions" aria-label={`Version ${cur} of ${n}`}>
              <button type="button" disabled={busy || cur <= 1} aria-label="Previous version" title="Previous version" onClick={() => onSwitch(turn, cur - 1)}>
                &lsaquo;
              </button>
              <span class="count">
                {cur}/{n}
              </span>
              <button type="button" disabled={busy || cur >= n} aria-label="Next version" title="Next version" onClick={() => onSwitch(turn, cur + 1)}>
                &rsaquo;
              </button>
            </span>
          )}
          {versions && (
            <button type="button" disabled={busy} aria-label={`Edit message ${turn}`} title="Edit and send again (the answer from here on is kept as another version)" onClick={() => setEditing(m.content)}>
              <Icon name="edit" size={14} />
            </button>
          )}
        </div>
      )}
    </div>
  );
}

/** imagesOf is a stored message's images (data: URLs), in order. */
function imagesOf(m: api.Message): string[] {
  return (m.parts ?? []).flatMap((p) => (p.type === "image_url" ? [p.image_url.url] : []));
}

/** UserBubble is a user's message: its images, then its text. */
function UserBubble({ text, images }: { text: string; images: string[] }) {
  return (
    <div class="msg user">
      {images.length > 0 && (
        <div class="images">
          {images.map((src, i) => (
            <img key={i} src={src} alt={`Attached image ${i + 1}`} />
          ))}
        </div>
      )}
      {text}
    </div>
  );
}

function Markdown({ text, class: cls }: { text: string; class: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class={cls + " md"} dangerouslySetInnerHTML={{ __html: html }} />;
}

function ErrorBox({ code, message }: { code?: string; message: string }) {
  if (code === "canceled") {
    return (
      <div class="msg stopped" role="note">
        Stopped
      </div>
    );
  }
  return (
    <div class="msg error" role="alert">
      <strong>{code ? errorTitle(code) : "Error"}</strong> {message}
      {code && <span class="code">{code}</span>}
    </div>
  );
}

/** errorTitle names an error code for people. */
function errorTitle(code: string): string {
  const titles: Record<string, string> = {
    invalid_request: "The server refused the message.",
    auth: "The model refused the credentials.",
    rate_limit: "The model is rate limited: try again in a moment.",
    upstream: "The model failed.",
    circuit_open: "The model is failing: the server waits before it tries again.",
    server_busy: "The server is busy: try again in a moment.",
    chat_busy: "The chat is busy.",
    too_many_turns: "Too many turns at once.",
    timeout: "The turn timed out.",
    max_turns: "The agent took the most steps it may.",
    sandbox: "The sandbox failed.",
    executor: "The agent failed.",
    hook: "The assistant's hook failed.",
    network: "The connection dropped.",
    shutting_down: "The server is restarting: send the message again.",
    assistant_unavailable: "The assistant does not run: its files have errors.",
  };
  return titles[code] ?? "The turn failed.";
}

/** useTick re-renders every second while on. */
function useTick(on: boolean) {
  const [, set] = useState(0);
  useEffect(() => {
    if (!on) return;
    const t = setInterval(() => set((n) => n + 1), 1000);
    return () => clearInterval(t);
  }, [on]);
}

/** Progress says what a running turn waits for: its newest progress
 * message (the sandbox starting, a long tool), else whether the agent
 * still starts or works, with the time since the turn began. */
function Progress({ turn, command }: { turn: Turn; command?: string }) {
  useTick(turn.running);
  const loading = [...turn.msgs].reverse().find((m) => m.type === "loading" && !m.done);
  const streaming = turn.msgs.some((m) => !m.done && (m.type === "text" || m.type === "thinking"));
  if (streaming && !loading) return null;
  let text = loading ? String(loading.props.message ?? loading.text) : "";
  if (!text) {
    const sandboxed = turn.msgs.some((m) => m.type === "loading" || m.type === "session");
    const started = turn.msgs.some((m) => m.type === "session" || m.type === "text" || m.type === "tool_call");
    text = sandboxed && !started ? `Starting ${agentName(command)}…` : "Working…";
  }
  const secs = Math.max(0, Math.floor((Date.now() - turn.started) / 1000));
  return (
    <div class="progress" role="status">
      <span class="spinner" aria-hidden="true" />
      <span class="what">{text}</span>
      {secs > 0 && <span class="elapsed">{secs}s</span>}
    </div>
  );
}

function TurnView({ turn, command, chat }: { turn: Turn; command?: string; chat: string }) {
  const results = toolResults(turn);
  const approvals = new Map<string, Msg>();
  for (const m of turn.msgs) if (m.type === "approval_resolved") approvals.set(String(m.props.approval_id), m);
  const shown = new Set<string>();
  for (const m of turn.msgs) if (m.type === "tool_call" && m.props.id) shown.add(String(m.props.id));
  const answer = turn.msgs.filter((m) => m.type === "text" && !m.agent).map((m) => m.text).join("\n\n");
  const errored = turn.msgs.some((m) => m.type === "error" && m.props.code !== "canceled");
  return (
    <section class="turn" aria-busy={turn.running}>
      {(turn.prompt !== undefined || turn.images?.length) && <UserBubble text={turn.prompt || (turn.images?.length ? "" : "…")} images={turn.images ?? []} />}
      {turn.msgs.map((m) => {
        if (m.type === "tool_result" && shown.has(String(m.props.tool_call_id))) return null;
        if (m.type === "approval_resolved") return null;
        if (m.type === "approval_requested") return <ApprovalCard key={m.id} chat={chat} m={m} resolved={approvals.get(String(m.props.approval_id))} />;
        const view = <MsgView key={m.id} m={m} result={m.type === "tool_call" ? results.get(String(m.props.id)) : undefined} />;
        // Another assistant's message, called by a hook: shown as its.
        return m.agent ? (
          <div key={m.id} class="nested" data-agent={m.agent.id}>
            <div class="meta">{m.agent.id}</div>
            {view}
          </div>
        ) : (
          view
        );
      })}
      {turn.running && <Progress turn={turn} command={command} />}
      {turn.final && (
        <footer class={"usage" + (turn.final.error && turn.final.error !== "canceled" ? " failed" : "")} aria-label="Usage of this turn" title={timingsLine(turn.final)}>
          {turn.final.error === "canceled" ? (
            <span class="outcome">Stopped</span>
          ) : turn.final.error && !errored ? (
            <span class="outcome">Failed ({turn.final.error})</span>
          ) : null}
          <span>{usageLine(turn.final)}</span>
          {answer && <CopyButton text={answer} />}
        </footer>
      )}
    </section>
  );
}

function CopyButton({ text }: { text: string }) {
  const [done, setDone] = useState("");
  return (
    <button
      type="button"
      class="icon"
      aria-label="Copy the answer"
      title={done || "Copy the answer"}
      onClick={() =>
        navigator.clipboard?.writeText(text).then(
          () => setDone("Copied"),
          () => setDone("Not copied"),
        )
      }
    >
      <Icon name={done === "Copied" ? "check" : "copy"} size={15} />
    </button>
  );
}

function MsgView({ m, result }: { m: Msg; result?: Msg }) {
  switch (m.type) {
    case "text":
      return <Markdown class="msg answer" text={m.text} />;
    case "thinking":
      return (
        <details class="msg thinking">
          <summary>{m.done ? "Thoughts" : "Thinking…"}</summary>
          <div class="body">{m.text}</div>
        </details>
      );
    case "tool_call":
      return <ToolCall m={m} result={result} />;
    case "tool_result":
      return (
        <details class="msg tool done" data-tool="result">
          <summary>
            <span class="verb">Tool result</span>
          </summary>
          <div class="tool-body">
            <pre>{typeof m.props.content === "string" ? m.props.content : m.text}</pre>
          </div>
        </details>
      );
    case "loading":
      // The newest running one shows as the turn's progress.
      return null;
    case "error":
      // A stopped turn says so in its usage line.
      return m.props.code === "canceled" ? null : <ErrorBox code={m.props.code} message={String(m.props.message ?? m.text)} />;
    case "user_message":
      // A message its user sent while the turn ran, where it came.
      return <div class="msg user said">{String(m.props.content ?? m.text)}</div>;
    case "notice":
      return (
        <div class="msg notice" role="note">
          {m.props.message ?? m.text}
          {m.props.suggested_action ? <div class="meta">Suggested: {String(m.props.suggested_action)}</div> : null}
        </div>
      );
    case "skill_proposed":
      return (
        <div class="msg skill" role="note">
          <Icon name="skills" size={16} />
          <div>
            <strong>Skill proposed: {m.props.name}</strong> — {m.props.description}
            <div class="meta">
              It is not used until you approve it{m.props.test ? "; a test turn tries it after this turn" : ""}.{" "}
              <a href={"#/skills/" + encodeURIComponent(String(m.props.proposal_id))}>Review it</a>
            </div>
          </div>
        </div>
      );
    case "session":
      return (
        <div class="msg session">
          {m.props.model ? String(m.props.model) : "Agent"} session {m.props.session_id ? String(m.props.session_id).slice(0, 8) : ""}
        </div>
      );
    default:
      return (
        <div class="msg custom">
          <span class="type">{m.type}</span> {m.text || customProps(m.props)}
        </div>
      );
  }
}

/** customProps is what a message of a type of its own says without text:
 * its props, shortly. */
function customProps(props: Record<string, any>): string {
  const s = JSON.stringify(props);
  return s === "{}" ? "" : s.length > 300 ? s.slice(0, 300) + "…" : s;
}

interface ComposerProps {
  text: string;
  setText: (s: string) => void;
  images: string[];
  setImages: (f: (i: string[]) => string[]) => void;
  running: boolean;
  stopping: boolean;
  disabled: boolean;
  placeholder: string;
  onSend: () => void;
  onStop: () => void;
  onInterrupt: () => void;
  onError: (e: unknown) => void;
}

// Images are scaled to this many pixels on their longer side (what vision
// models look at) and, together with the text, must fit the server's 1 MB
// request limit.
const imageSide = 1568;
const imagesBudget = 900_000;
const maxImages = 8;

/** readImage returns an image file as a data: URL, scaled down and
 * re-encoded when it is large. */
async function readImage(file: File): Promise<string> {
  if (!file.type.startsWith("image/")) throw new Error(`${file.name} is not an image`);
  const bmp = await createImageBitmap(file).catch(() => {
    throw new Error(`${file.name} is not an image this browser can read`);
  });
  const scale = Math.min(1, imageSide / Math.max(bmp.width, bmp.height));
  if (scale === 1 && file.size < 300_000 && /^image\/(png|jpeg|gif|webp)$/.test(file.type)) {
    bmp.close();
    return new Promise((resolve, reject) => {
      const r = new FileReader();
      r.onload = () => resolve(String(r.result));
      r.onerror = () => reject(new Error(`${file.name} could not be read`));
      r.readAsDataURL(file);
    });
  }
  const c = document.createElement("canvas");
  c.width = Math.round(bmp.width * scale);
  c.height = Math.round(bmp.height * scale);
  const g = c.getContext("2d")!;
  g.fillStyle = "#fff";
  g.fillRect(0, 0, c.width, c.height);
  g.drawImage(bmp, 0, 0, c.width, c.height);
  bmp.close();
  for (const q of [0.85, 0.7, 0.5]) {
    const url = c.toDataURL("image/jpeg", q);
    if (url.length < imagesBudget / 2) return url;
  }
  throw new Error(`${file.name} is too large to send, even scaled down`);
}

function Composer({ text, setText, images, setImages, running, stopping, disabled, placeholder, onSend, onStop, onInterrupt, onError }: ComposerProps) {
  const area = useRef<HTMLTextAreaElement>(null);
  const picker = useRef<HTMLInputElement>(null);
  const [dragging, setDragging] = useState(false);

  // The box grows with its text, up to a point.
  useEffect(() => {
    const el = area.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = Math.min(el.scrollHeight, 240) + "px";
    el.style.overflowY = el.scrollHeight > 240 ? "auto" : "hidden";
  }, [text]);

  const attach = async (files: Iterable<File>) => {
    try {
      const next = [...images];
      for (const f of files) next.push(await readImage(f));
      if (next.length > maxImages) throw new Error(`At most ${maxImages} images go with one message.`);
      if (next.reduce((n, u) => n + u.length, 0) > imagesBudget) throw new Error("These images are too large together for one message: send fewer or smaller ones.");
      setImages(() => next);
    } catch (e) {
      onError(e);
    } finally {
      if (picker.current) picker.current.value = "";
    }
  };

  const canSend = !disabled && (text.trim() !== "" || images.length > 0);
  return (
    <form
      class={"composer" + (dragging ? " dragging" : "")}
      onSubmit={(e) => {
        e.preventDefault();
        onSend();
      }}
      onDragOver={(e) => {
        if (e.dataTransfer?.types.includes("Files")) {
          e.preventDefault();
          setDragging(true);
        }
      }}
      onDragLeave={() => setDragging(false)}
      onDrop={(e) => {
        e.preventDefault();
        setDragging(false);
        attach(Array.from(e.dataTransfer?.files ?? []).filter((f) => f.type.startsWith("image/")));
      }}
    >
      <div class="box">
        {images.length > 0 && (
          <ul class="attachments" aria-label="Attached images">
            {images.map((src, i) => (
              <li key={i}>
                <img src={src} alt={`Attached image ${i + 1}`} />
                <button type="button" class="remove" aria-label={`Remove image ${i + 1}`} onClick={() => setImages((cur) => cur.filter((_, j) => j !== i))}>
                  <Icon name="close" size={12} />
                </button>
              </li>
            ))}
          </ul>
        )}
        <textarea
          id="message"
          ref={area}
          aria-label="Message"
          placeholder={placeholder}
          disabled={disabled}
          value={text}
          rows={1}
          onInput={(e) => setText(e.currentTarget.value)}
          onPaste={(e) => {
            const files = Array.from(e.clipboardData?.files ?? []).filter((f) => f.type.startsWith("image/"));
            if (files.length) {
              e.preventDefault();
              attach(files);
            }
          }}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
              e.preventDefault();
              if (canSend) onSend();
            } else if (e.key === "Escape" && running) {
              e.preventDefault();
              onStop();
            }
          }}
        />
        <div class="actions">
          <button type="button" class="icon round" onClick={() => picker.current?.click()} aria-label="Attach images" title="Attach images">
            <Icon name="attach" />
          </button>
          <input id="attach-input" ref={picker} type="file" accept="image/png,image/jpeg,image/gif,image/webp" multiple hidden aria-label="Images to attach" onChange={(e) => attach(Array.from(e.currentTarget.files ?? []))} />
          <span class="grow" />
          {running && (
            <>
              <button type="button" class="interrupt" onClick={onInterrupt} disabled={stopping} aria-label="Interrupt the current step" title="Interrupt: stop this step, keep the chat and its agent">
                Interrupt
              </button>
              <button type="button" class="stop round" onClick={onStop} disabled={stopping} aria-label="Stop the running turn" title="Cancel: stop the turn and its agent (Esc)">
                <Icon name="stop" />
              </button>
            </>
          )}
          <button
            type="submit"
            class="primary round"
            disabled={!canSend}
            aria-label={running ? "Send while it works" : "Send"}
            title={running ? "Send now: the agent reads it before its next step (Enter)" : "Send (Enter)"}
          >
            <Icon name="send" />
          </button>
        </div>
      </div>
      <p class="fine">
        <kbd>Enter</kbd> sends · <kbd>Shift</kbd>+<kbd>Enter</kbd> new line · <kbd>?</kbd> shortcuts
      </p>
    </form>
  );
}
