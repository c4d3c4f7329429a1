// A turn as the page shows it: its messages in the order they started,
// built from chat events (start, delta, end, replace, done).
import type { ChatEvent, Final } from "./api";

export interface Msg {
  id: string;
  type: string;
  text: string;
  props: Record<string, any>;
  done: boolean;
}

export interface Turn {
  /** key identifies the turn on the page. */
  key: string;
  /** prompt is the user's message, when the page knows it. */
  prompt?: string;
  msgs: Msg[];
  final?: Final;
  running: boolean;
  /** lastEventId is where a resumed stream continues. */
  lastEventId: string;
}

export function newTurn(key: string, prompt?: string): Turn {
  return { key, prompt, msgs: [], running: true, lastEventId: "" };
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
      m = { id: ev.id, type: ev.type ?? "text", text: ev.text ?? "", props: ev.props ?? {}, done: false };
      break;
    case "replace":
      m = { id: ev.id, type: ev.type ?? cur?.type ?? "text", text: ev.text ?? "", props: ev.props ?? {}, done: false };
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

/** toolResults maps tool call ids to their result messages, so a call
 * shows its result inside it. */
export function toolResults(t: Turn): Map<string, Msg> {
  const out = new Map<string, Msg>();
  for (const m of t.msgs) {
    if (m.type === "tool_result" && m.props.tool_call_id) out.set(String(m.props.tool_call_id), m);
  }
  return out;
}

/** usageLine describes what a turn cost. */
export function usageLine(f: Final): string {
  const u = f.usage ?? { input_tokens: 0, output_tokens: 0 };
  const parts = [`${u.input_tokens.toLocaleString()} in`, `${u.output_tokens.toLocaleString()} out`];
  if (u.cache_read_tokens) parts.push(`${u.cache_read_tokens.toLocaleString()} cached`);
  if (u.cost_usd) parts.push("$" + u.cost_usd.toFixed(4));
  if (u.turns) parts.push(u.turns + (u.turns === 1 ? " turn" : " turns"));
  if (u.duration_ms) parts.push((u.duration_ms / 1000).toFixed(1) + "s");
  return parts.join(" · ");
}
