// The chat's desktop: the noVNC client the sandbox serves itself, on the
// preview URL of its desktop port, in a frame. The preview has an origin
// of its own, so nothing in the frame reaches the API with the user's
// credentials; its URL's short-lived ticket becomes a cookie for that
// origin alone.
import { useState } from "preact/hooks";
import { Icon } from "./icons";
import { NewTab, Reload, usePorts } from "./ports";

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
  usePorts(
    chatId,
    visible && !state.url,
    (ports) => {
      const d = ports.find((p) => p.port === DESKTOP_PORT);
      if (d && d.state === "listening") {
        setState({ url: desktopURL(d.url), status: "" });
        return true;
      }
      setState({ url: "", status: d ? "The desktop is starting…" : "The desktop starts with the chat's sandbox: send a message." });
      return false;
    },
    onError,
    [attempt],
  );

  return (
    <div class="desktop">
      <div class="desktop-bar">
        <span class="status" role="status">
          {state.url ? "Live: what the agent's browser shows. Click into it to use it." : state.status}
        </span>
        <span class="grow" />
        {state.url && <NewTab url={state.url} what="desktop" />}
        <Reload
          what="desktop"
          title="Reconnect"
          onClick={() => {
            setState({ url: "", status: "Connecting…" });
            setAttempt((n) => n + 1);
          }}
        />
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
