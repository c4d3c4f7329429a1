// The chat's desktop: the noVNC client the sandbox serves itself, on the
// preview URL of its desktop port, in a frame. The preview has an origin
// of its own, so nothing in the frame reaches the API with the user's
// credentials; its URL's short-lived ticket becomes a cookie for that
// origin alone.
import { useEffect, useState } from "preact/hooks";
import * as api from "./api";
import { Icon } from "./icons";

/** DESKTOP_PORT is the sandbox's noVNC port (package desktop, NoVNCPort). */
export const DESKTOP_PORT = 6080;

/** desktopURL turns the desktop port's preview URL into noVNC's page,
 * connecting at once, scaled to the frame, reconnecting after a drop. */
export function desktopURL(preview: string): string {
  const u = new URL(preview);
  u.pathname = "/vnc.html";
  u.searchParams.set("autoconnect", "1");
  u.searchParams.set("resize", "scale");
  u.searchParams.set("reconnect", "1");
  u.searchParams.set("path", "websockify");
  return u.toString();
}

type State = { url: string; status: string };

export function DesktopPanel({ chatId, visible, onError }: { chatId: string; visible: boolean; onError: (e: unknown) => void }) {
  const [state, setState] = useState<State>({ url: "", status: "" });
  const [attempt, setAttempt] = useState(0);

  // While the panel shows and no desktop is on screen, ask for the chat's
  // ports until the desktop's listens (its sandbox starts with the chat's
  // next message).
  useEffect(() => {
    if (!visible || !chatId || state.url) return;
    let stopped = false;
    let timer = 0;
    const look = async () => {
      try {
        const ports = await api.chatPorts(chatId);
        if (stopped) return;
        const d = ports.find((p) => p.port === DESKTOP_PORT);
        if (d && d.state === "listening") {
          setState({ url: desktopURL(d.url), status: "" });
          return;
        }
        setState({ url: "", status: d ? "The desktop is starting…" : "The desktop starts with the chat's sandbox: send a message." });
      } catch (e) {
        if (stopped) return;
        onError(e);
        return;
      }
      timer = window.setTimeout(look, 2000);
    };
    look();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [chatId, visible, attempt, state.url]);

  return (
    <div class="desktop">
      <div class="desktop-bar">
        <span class="status" role="status">
          {state.url ? "Live: what the agent's browser shows. Click into it to use it." : state.status}
        </span>
        <span class="grow" />
        {state.url && (
          <a class="icon" href={state.url} target="_blank" rel="noopener noreferrer" aria-label="Open the desktop in a new tab" title="Open in a new tab">
            <Icon name="eye" size={16} />
          </a>
        )}
        <button
          type="button"
          class="icon"
          aria-label="Reconnect the desktop"
          title="Reconnect"
          onClick={() => {
            setState({ url: "", status: "Connecting…" });
            setAttempt((n) => n + 1);
          }}
        >
          <Icon name="refresh" size={16} />
        </button>
      </div>
      {state.url ? (
        <iframe class="desktop-view" title="Desktop" src={state.url} allow="clipboard-read; clipboard-write" />
      ) : (
        <div class="desktop-empty">
          <Icon name="monitor" size={32} />
          <p>{state.status || "Connecting…"}</p>
        </div>
      )}
    </div>
  );
}
