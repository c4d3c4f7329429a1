// A terminal in the chat's sandbox: xterm.js in the page, a WebSocket to
// a shell on a pty in a sandbox made like the assistant's. Closing the
// panel's session (or leaving the chat) closes the socket, and the
// server removes the sandbox.
import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import * as api from "./api";
import { Icon } from "./icons";

type State = "idle" | "connecting" | "open" | "ended";

export function TerminalPanel({ chatId, visible, onError }: { chatId: string; visible: boolean; onError: (e: unknown) => void }) {
  const host = useRef<HTMLDivElement>(null);
  const session = useRef<{ term: Terminal; fit: FitAddon; ws: WebSocket } | null>(null);
  const [state, setState] = useState<State>("idle");
  const [status, setStatus] = useState("");

  const close = () => {
    const s = session.current;
    if (s && s.ws.readyState <= WebSocket.OPEN) s.ws.close(1000, "closed by the user");
  };

  const open = () => {
    if (!host.current) return;
    session.current?.term.dispose();
    host.current.innerHTML = "";
    const term = new Terminal({ cursorBlink: true, fontSize: 13, convertEol: false, scrollback: 5000, theme: { background: "#0d0f12" } });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current);
    fit.fit();
    const ws = api.terminalSocket(chatId, term.rows, term.cols);
    session.current = { term, fit, ws };
    setState("connecting");
    setStatus("Starting a sandbox…");
    const enc = new TextEncoder();
    term.onData((d) => ws.readyState === WebSocket.OPEN && ws.send(enc.encode(d)));
    term.onResize(({ rows, cols }) => ws.readyState === WebSocket.OPEN && ws.send(JSON.stringify({ type: "resize", rows, cols })));
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        term.write(new Uint8Array(ev.data as ArrayBuffer));
        return;
      }
      const m = JSON.parse(ev.data);
      switch (m.type) {
        case "ready":
          setState("open");
          setStatus(`Shell in a ${m.runtime} sandbox of ${m.assistant_id}`);
          fit.fit();
          ws.send(JSON.stringify({ type: "resize", rows: term.rows, cols: term.cols }));
          term.focus();
          break;
        case "exit":
          setStatus(`The shell exited with status ${m.code}.`);
          term.write(`\r\n[exited with status ${m.code}]\r\n`);
          break;
        case "closed":
          setStatus(`Closed: ${m.reason}.`);
          break;
        case "error":
          setStatus(`Error: ${m.message}`);
          onError(new api.ApiError(0, m.error_code ?? "terminal", m.message));
          break;
      }
    };
    ws.onclose = () => {
      setState("ended");
      setStatus((s) => (s.startsWith("Shell in") || s.startsWith("Starting") ? "The terminal was closed; its sandbox is removed." : s));
    };
  };

  // Fit the terminal to its panel when the panel shows or resizes.
  useEffect(() => {
    if (!host.current) return;
    const ro = new ResizeObserver(() => {
      const s = session.current;
      if (s && visible && host.current!.clientWidth > 0) s.fit.fit();
    });
    ro.observe(host.current);
    return () => ro.disconnect();
  }, [visible]);

  // Leaving the chat closes its terminal.
  useEffect(
    () => () => {
      close();
      session.current?.term.dispose();
    },
    [],
  );

  return (
    <div class="terminal">
      <div class="toolbar">
        {state === "open" || state === "connecting" ? (
          <button type="button" onClick={close} aria-label="Close the terminal">
            <Icon name="close" size={15} /> Close
          </button>
        ) : (
          <button type="button" class="primary" onClick={open} aria-label="Open a terminal in the chat's sandbox">
            <Icon name="terminal" size={15} /> {state === "ended" ? "Open again" : "Open a terminal"}
          </button>
        )}
        <span role="status" class="status">
          {status}
        </span>
      </div>
      <div class="xterm-host" ref={host} aria-label="Terminal output" />
    </div>
  );
}
