// A turn as the page shows it: its messages in the order they started,
// built from chat events (start, delta, end, replace, merge, set, append,
// done).
import type { ChatEvent, Final } from "./api";

export interface Msg {
  id: string;
  type: string;
  text: string;
  props: Record<string, any>;
  done: boolean;
  /** The assistant a hook called whose message this is (absent: the turn's own). */
  agent?: { id: string; call: string };
}

export interface Turn {
  /** key identifies the turn on the page. */
  key: string;
  /** prompt is the user's message, when the page knows it. */
  prompt?: string;
  /** images are the message's attached images (data: URLs). */
  images?: string[];
  /** started is when the page saw the turn start (ms since the epoch). */
  started: number;
  msgs: Msg[];
  final?: Final;
  running: boolean;
  /** lastEventId is where a resumed stream continues. */
  lastEventId: string;
}

export function newTurn(key: string, prompt?: string, images?: string[]): Turn {
  return { key, prompt, images, msgs: [], running: true, lastEventId: "", started: Date.now() };
}

/** apply returns the turn with ev applied (a new object; messages that
 * changed are new objects too, so views re-render only those). */
export function apply(t: Turn, ev: ChatEvent, eventId: string): Turn {
  const next: Turn = { ...t, lastEventId: eventId || t.lastEventId };
  if (ev.event === "done") {
    next.final = ev.done;
    next.running = false;
    next.msgs = t.msgs.map((m) => (m.done ? m : { ...m, done: true }));
    return next;
  }
  if (!ev.id) return next;
  const i = t.msgs.findIndex((m) => m.id === ev.id);
  const cur: Msg | undefined = i >= 0 ? t.msgs[i] : undefined;
  let m: Msg;
  switch (ev.event) {
    case "start":
      m = { id: ev.id, type: ev.type ?? "text", text: ev.text ?? "", props: ev.props ?? {}, done: false, agent: ev.agent };
      break;
    case "merge":
    case "set":
    case "append":
      if (!cur) return next;
      m = update(cur, ev.event, ev.path ?? "", ev.value);
      break;
    case "replace":
      m = { id: ev.id, type: ev.type ?? cur?.type ?? "text", text: ev.text ?? "", props: ev.props ?? {}, done: false, agent: ev.agent ?? cur?.agent };
      break;
    case "delta":
      m = cur
        ? { ...cur, text: cur.text + (ev.text ?? "") }
        : { id: ev.id, type: ev.type ?? "text", text: ev.text ?? "", props: {}, done: false };
      if (ev.props) m.props = { ...m.props, ...ev.props };
      break;
    case "end":
      m = cur ? { ...cur, done: true } : { id: ev.id, type: ev.type ?? "text", text: "", props: {}, done: true };
      if (ev.props) m.props = { ...m.props, ...ev.props };
      break;
    default:
      return next;
  }
  next.msgs = i >= 0 ? t.msgs.map((x, j) => (j === i ? m : x)) : [...t.msgs, m];
  return next;
}

/** update returns m with a hook's merge, set or append applied at path,
 * a dotted path from the message ("props.items"; merge's default is
 * "props", append's "props.content"). The message's text follows
 * props.content. */
function update(m: Msg, op: string, path: string, value: any): Msg {
  if (op === "merge" && !path) path = "props";
  if (op === "append" && !path) path = "props.content";
  const keys = path.split(".").filter((k) => k !== "");
  if (keys[0] !== "props") return m; // only props change (type and text have their own events)
  const props: Record<string, any> = structuredClone(m.props);
  let obj: Record<string, any> = props;
  for (const k of keys.slice(1, -1)) {
    if (typeof obj[k] !== "object" || obj[k] === null) obj[k] = {};
    obj = obj[k];
  }
  const last = keys[keys.length - 1];
  const target = keys.length === 1 ? null : last;
  const at = target === null ? props : obj[target];
  let v: any;
  if (op === "merge") v = { ...(typeof at === "object" && at !== null ? at : {}), ...(value ?? {}) };
  else if (op === "append") v = Array.isArray(at) ? [...at, value] : typeof at === "string" ? at + String(value) : at === undefined ? value : [at, value];
  else v = value;
  const out: Msg = { ...m, props: target === null ? v : props };
  if (target !== null) obj[target] = v;
  if (typeof out.props.content === "string" && keys.length === 2 && last === "content") out.text = out.props.content;
  return out;
}

/** toolResults maps tool call ids to their result messages, so a call
 * shows its result inside it. */
export function toolResults(t: Turn): Map<string, Msg> {
  const out = new Map<string, Msg>();
  for (const m of t.msgs) {
    if (m.type === "tool_result" && m.props.tool_call_id) out.set(String(m.props.tool_call_id), m);
  }
  return out;
}

/** compact writes a count for people: 950, 81.8k, 1.2M. */
export function compact(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0).replace(/\.0$/, "") + "k";
  return (n / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
}

const seconds = (ms: number) => (ms < 10_000 ? (ms / 1000).toFixed(1) : Math.round(ms / 1000)) + "s";

/** usageLine describes what a turn took: its time, tokens and, when the
 * model has a price, its cost. */
export function usageLine(f: Final): string {
  const u = f.usage ?? { input_tokens: 0, output_tokens: 0 };
  const parts: string[] = [];
  if (u.duration_ms) parts.push(seconds(u.duration_ms));
  if (u.input_tokens || u.output_tokens) parts.push(`${compact(u.input_tokens + (u.cache_read_tokens ?? 0))} in · ${compact(u.output_tokens)} out`);
  if (u.turns) parts.push(u.turns + (u.turns === 1 ? " step" : " steps"));
  if (u.cost_usd) parts.push("$" + u.cost_usd.toFixed(u.cost_usd < 0.1 ? 4 : 2));
  return parts.join(" · ");
}

/** timingsLine says where a turn's time went, for its usage's tooltip. */
export function timingsLine(f: Final): string {
  const t = f.timings;
  if (!t) return "";
  const parts: string[] = [];
  if (t.chat_wait_ms) parts.push("waited for the chat " + seconds(t.chat_wait_ms));
  if (t.sandbox_wait_ms) parts.push("waited for a sandbox " + seconds(t.sandbox_wait_ms));
  if (t.sandbox_create_ms) parts.push(`sandbox${t.sandbox ? " (" + t.sandbox + ")" : ""} ${seconds(t.sandbox_create_ms)}`);
  if (t.cli_start_ms) parts.push("agent start " + seconds(t.cli_start_ms));
  if (t.first_text_ms) parts.push("first words at " + seconds(t.first_text_ms));
  if (t.tools) parts.push(`${t.tools} tool call${t.tools === 1 ? "" : "s"} ${seconds(t.tools_ms ?? 0)}`);
  parts.push("total " + seconds(t.total_ms));
  return parts.join(", ");
}
