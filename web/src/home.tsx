// A new chat: the assistants as cards (name, description, tags, what
// runs it), and the chosen one's greeting and example prompts
// (package.yao's placeholder).
import { useState } from "preact/hooks";
import * as api from "./api";
import { Icon } from "./icons";

/** A template Yao did not translate ("{{placeholder_title}}") is not
 * shown. */
const shown = (s?: string) => (s && !/\{\{.*\}\}/.test(s) ? s : "");

// Colours with white text at WCAG AA contrast.
const palette = ["#2f5bd3", "#0f766e", "#c2410c", "#7c3aed", "#c0265e", "#15803d", "#0e7490", "#a16207", "#4d5dd8", "#9333ea"];
const colours = new Map<string, string>();

/** colourAssistants gives the listed assistants colours of their own, in
 * the list's order. */
export function colourAssistants(list: api.Assistant[]) {
  list.forEach((a, i) => colours.set(a.id, palette[i % palette.length]));
}

/** hue is an assistant's colour: its own, else one picked from its id
 * (FNV-1a). */
function hue(id: string): string {
  const c = colours.get(id);
  if (c) return c;
  let h = 0x811c9dc5;
  for (const ch of id) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  return palette[h % palette.length];
}

/** Avatar is the assistant's picture (package.yao's avatar), or its
 * initials on a colour of its own when there is none or it does not
 * load. */
export function Avatar({ a, size = 36 }: { a?: api.Assistant; size?: number }) {
  const [broken, setBroken] = useState(false);
  const name = a?.name ?? "?";
  const style = { width: size + "px", height: size + "px", fontSize: Math.round(size * 0.4) + "px" };
  if (a?.avatar && !broken) return <img class="avatar" src={a.avatar} alt="" style={style} onError={() => setBroken(true)} />;
  const initials = name
    .split(/[\s_-]+/)
    .filter(Boolean)
    .slice(0, 2)
    .map((w) => w[0].toUpperCase())
    .join("");
  return (
    <span class="avatar" style={{ ...style, background: hue(a?.id ?? name) }} aria-hidden="true">
      {initials || "?"}
    </span>
  );
}

const agents: Record<string, string> = { claude: "Claude Code", codex: "Codex", gemini: "Gemini CLI", opencode: "opencode", cursor: "Cursor" };

/** agentName names a sandboxed assistant's CLI for people. */
export const agentName = (command?: string) => (command ? (agents[command] ?? command) : "the agent");

/** runsOn says what runs an assistant. */
const runsOn = (a: api.Assistant) => (!a.available ? "does not run" : a.sandboxed ? `${agentName(a.command)} · sandbox` : "chat");

/** position is a problem's file:line:col. */
const position = (p: { file: string; line?: number; col?: number }) => p.file + (p.line ? `:${p.line}` + (p.col ? `:${p.col}` : "") : "");

/** Broken says why an assistant does not run (or runs its last good
 * version): each error of its files, with its position. */
export function Broken({ a }: { a: api.Assistant }) {
  if (!a.error) return null;
  return (
    <div class="broken" role="alert" data-broken={a.id}>
      <strong>
        {a.error.serving_last_good
          ? `${a.name}'s files have errors: its last good version answers until they are fixed.`
          : `${a.name} does not run: its files have errors.`}
      </strong>
      <ul>
        {a.error.problems.map((p, i) => (
          <li key={i}>
            <code>{position(p)}</code> {p.message}
          </li>
        ))}
      </ul>
    </div>
  );
}

interface Props {
  assistants: api.Assistant[];
  selected: string;
  onSelect: (id: string) => void;
  onPrompt: (text: string) => void;
}

export function Home({ assistants, selected, onSelect, onPrompt }: Props) {
  const current = assistants.find((a) => a.id === selected);
  const ph = current?.placeholder;
  const title = shown(ph?.title) || (current ? `Chat with ${current.name}` : "What can I help you with?");
  const prompts = (ph?.prompts ?? []).map(shown).filter(Boolean);
  return (
    <div class="home">
      <header class="greeting">
        <Avatar a={current} size={48} />
        <h2>{title}</h2>
        {shown(ph?.description) && <p>{shown(ph?.description)}</p>}
      </header>
      {current && <Broken a={current} />}
      {assistants.length > 1 && <h3 class="cards-title">Assistants</h3>}
      <div class="cards" role="radiogroup" aria-label="Assistants">
        {assistants.map((a) => (
          <button
            key={a.id}
            type="button"
            role="radio"
            class={a.available ? "card" : "card unavailable"}
            aria-checked={a.id === selected}
            data-assistant={a.id}
            onClick={() => onSelect(a.id)}
          >
            <div class="card-head">
              <Avatar a={a} size={32} />
              <div class="card-title">
                <span class="card-name">{a.name}</span>
                <span class="card-runs">
                  {a.sandboxed && <Icon name="sandbox" size={12} />} {runsOn(a)}
                </span>
              </div>
              {a.id === selected && (
                <span class="card-check">
                  <Icon name="check" size={16} />
                </span>
              )}
            </div>
            {a.description && <p class="card-desc">{a.description}</p>}
            {(a.tags?.length ?? 0) > 0 && (
              <div class="tags">
                {a.tags!.map((t) => (
                  <span key={t} class="tag">
                    {t}
                  </span>
                ))}
              </div>
            )}
          </button>
        ))}
      </div>
      {prompts.length > 0 && (
        <section class="prompts" aria-label="Example prompts">
          <h3>Try</h3>
          {prompts.map((p) => (
            <button key={p} type="button" class="prompt" onClick={() => onPrompt(p)}>
              <span>{p}</span>
              <Icon name="send" size={14} />
            </button>
          ))}
        </section>
      )}
    </div>
  );
}
