// The keyboard shortcuts, listed in a dialog ("?" opens it). The keys
// themselves are handled where they act: the app (new chat, focus,
// assistant, this list) and the message box (send, new line, stop).
import { Fragment } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { Icon } from "./icons";

const mac = /Mac|iPhone|iPad/.test(navigator.platform);

/** mod reports the platform's command key: ⌘ on a Mac, Ctrl elsewhere. */
export const mod = (e: KeyboardEvent) => (mac ? e.metaKey : e.ctrlKey);

const Mod = mac ? "⌘" : "Ctrl";

/** The shortcuts, in the order the dialog lists them. */
export const shortcuts: { keys: string[]; what: string }[] = [
  { keys: ["Enter"], what: "Send the message" },
  { keys: ["Shift", "Enter"], what: "New line in the message" },
  { keys: ["Esc"], what: "Stop the running turn (in the message box)" },
  { keys: [Mod, "Shift", "O"], what: "New chat" },
  { keys: ["Shift", "Esc"], what: "Focus the message box" },
  { keys: ["Alt", "↓"], what: "Next assistant (for a new chat)" },
  { keys: ["Alt", "↑"], what: "Previous assistant (for a new chat)" },
  { keys: ["?"], what: "Show these shortcuts" },
];

export function Shortcuts({ onClose }: { onClose: () => void }) {
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const prev = document.activeElement as HTMLElement | null;
    ref.current?.focus();
    return () => prev?.focus?.();
  }, []);
  return (
    <div class="modal-backdrop" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div
        class="modal"
        role="dialog"
        aria-modal="true"
        aria-labelledby="shortcuts-title"
        tabIndex={-1}
        ref={ref}
        onKeyDown={(e) => {
          if (e.key === "Escape") {
            e.stopPropagation();
            onClose();
          }
        }}
      >
        <header>
          <h2 id="shortcuts-title">Keyboard shortcuts</h2>
          <button type="button" class="icon" aria-label="Close" onClick={onClose}>
            <Icon name="close" />
          </button>
        </header>
        <table class="keys">
          <tbody>
            {shortcuts.map((s) => (
              <tr key={s.what}>
                <td>{s.what}</td>
                <td class="k">
                  {s.keys.map((k, i) => (
                    <Fragment key={k}>
                      {i > 0 && <span class="plus">+</span>}
                      <kbd>{k}</kbd>
                    </Fragment>
                  ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
