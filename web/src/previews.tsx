// The chat's previews: what the agent serves on the ports its assistant
// declares, each on a preview URL of its own origin, in a frame. Nothing
// in the frame reaches the API with the user's credentials; the URL's
// short-lived ticket becomes a cookie for that preview's origin alone.
import { useState } from "preact/hooks";
import * as api from "./api";
import { Icon } from "./icons";
import { NewTab, Reload, usePorts } from "./ports";

type Declared = { port: number; label?: string };

/** name is how a port shows: its label and number, or the number. */
const name = (p: Declared) => (p.label ? `${p.label} (${p.port})` : `port ${p.port}`);

export function PreviewPanel({ chatId, declared, visible, onError }: { chatId: string; declared: Declared[]; visible: boolean; onError: (e: unknown) => void }) {
  const [ports, setPorts] = useState<api.PortInfo[]>([]);
  const [chosen, setChosen] = useState(declared[0]?.port ?? 0);
  // url is the frame's preview URL: taken once per port chosen, while the
  // frame keeps its cookie (a fresh ticket on every poll would reload it).
  const [url, setUrl] = useState("");
  const [attempt, setAttempt] = useState(0);

  // While the panel shows, ask for the chat's ports every two seconds:
  // a server the agent starts shows up as it listens.
  usePorts(
    chatId,
    visible,
    (list) => {
      setPorts(list);
      const p = list.find((x) => x.port === chosen);
      setUrl((cur) => (p && p.state === "listening" ? cur || p.url : ""));
      return false;
    },
    onError,
    [chosen, attempt],
  );

  const live = ports.find((p) => p.port === chosen);
  const status = url
    ? `Live: what the sandbox serves on ${name(declared.find((d) => d.port === chosen) ?? { port: chosen })}.`
    : live
      ? "Nothing listens on this port yet: ask the agent to start its server."
      : "The preview starts with the chat's sandbox: send a message.";
  return (
    <div class="desktop preview">
      <div class="desktop-bar">
        {declared.length > 1 && (
          <select
            aria-label="Port"
            value={String(chosen)}
            onChange={(e) => {
              setUrl("");
              setChosen(Number((e.target as HTMLSelectElement).value));
            }}
          >
            {declared.map((d) => (
              <option value={String(d.port)}>
                {name(d)}
                {ports.find((p) => p.port === d.port)?.state === "listening" ? " ●" : ""}
              </option>
            ))}
          </select>
        )}
        <span class="status" role="status">
          {status}
        </span>
        <span class="grow" />
        {url && <NewTab url={url} what="preview" />}
        <Reload
          what="preview"
          title="Reload"
          onClick={() => {
            setUrl("");
            setAttempt((n) => n + 1);
          }}
        />
      </div>
      {url ? (
        <iframe class="desktop-view preview-view" title="Preview" src={url} />
      ) : (
        <div class="desktop-empty">
          <Icon name="globe" size={32} />
          <p>{status}</p>
        </div>
      )}
    </div>
  );
}
