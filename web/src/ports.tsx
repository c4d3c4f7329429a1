// What the desktop and the preview panels share: asking for the chat's
// ports while a panel shows, and the buttons of their bar.
import { useEffect } from "preact/hooks";
import * as api from "./api";
import { Icon } from "./icons";

/** usePorts asks for the chat's ports every two seconds while active,
 * handing each list to seen, until seen says it has what it waited for
 * (true) or an error goes to onError. deps restart it. */
export function usePorts(chatId: string, active: boolean, seen: (ports: api.PortInfo[]) => boolean, onError: (e: unknown) => void, deps: unknown[]) {
  useEffect(() => {
    if (!active || !chatId) return;
    let stopped = false;
    let timer = 0;
    const look = async () => {
      try {
        const ports = await api.chatPorts(chatId);
        if (stopped || seen(ports)) return;
      } catch (e) {
        if (!stopped) onError(e);
        return;
      }
      timer = window.setTimeout(look, 2000);
    };
    look();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [chatId, active, ...deps]);
}

/** NewTab links to a preview URL in a new tab. */
export function NewTab({ url, what }: { url: string; what: string }) {
  return (
    <a class="icon" href={url} target="_blank" rel="noopener noreferrer" aria-label={`Open the ${what} in a new tab`} title="Open in a new tab">
      <Icon name="eye" size={16} />
    </a>
  );
}

/** Reload is a panel's button that connects its frame again. */
export function Reload({ what, title, onClick }: { what: string; title: string; onClick: () => void }) {
  return (
    <button type="button" class="icon" aria-label={`${title} the ${what}`} title={title} onClick={onClick}>
      <Icon name="refresh" size={16} />
    </button>
  );
}
