// A tool call the assistant's approval policy asks about: the tool, its
// input (an edit's diff), the rule that asked, and allow, deny and
// always (allow for the rest of the chat). The answer goes to
// POST /api/chats/{chat}/approvals/{id}; the turn's approval_resolved
// message shows what was decided.
import { useState } from "preact/hooks";
import * as api from "./api";
import { parseUnified } from "./diff";
import { DiffView } from "./tools";
import { Msg } from "./turn";

export function ApprovalCard({ chat, m, resolved }: { chat: string; m: Msg; resolved?: Msg }) {
  const [busy, setBusy] = useState(false);
  const [err, setErr] = useState("");
  const id = String(m.props.approval_id ?? "");
  const tool = String(m.props.tool ?? "");
  const diff = typeof m.props.diff === "string" ? m.props.diff : "";
  const answer = async (decision: "allow" | "deny", remember = false) => {
    setBusy(true);
    setErr("");
    try {
      await api.call("POST", `/api/chats/${encodeURIComponent(chat)}/approvals/${encodeURIComponent(id)}`, { decision, remember });
    } catch (e) {
      setErr(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  const decided = resolved ? String(resolved.props.decision) : "";
  return (
    <div class="msg approval" role={decided ? "note" : "alertdialog"} aria-label={`Allow ${tool}?`} data-approval={id}>
      <div>
        <strong>{decided ? (decided === "allow" ? "Allowed" : "Denied") : "Allow"}</strong> <code>{tool}</code>
        {decided ? "" : "?"} <span class="meta">rule {String(m.props.rule ?? "")}</span>
      </div>
      {diff ? <DiffView lines={parseUnified(diff)} path={String((m.props.input as any)?.file_path ?? "")} /> : <pre class="input">{JSON.stringify(m.props.input, null, 2)}</pre>}
      {decided ? (
        <div class="meta">
          {resolved?.props.by === "timeout" ? "Nobody answered in time." : ""} {resolved?.props.reason ? String(resolved.props.reason) : ""}
        </div>
      ) : (
        <div class="actions">
          <button type="button" disabled={busy} onClick={() => answer("allow")}>
            Allow
          </button>
          <button type="button" disabled={busy} onClick={() => answer("allow", true)} title="Allow what this rule asks about for the rest of the chat">
            Always
          </button>
          <button type="button" class="danger" disabled={busy} onClick={() => answer("deny")}>
            Deny
          </button>
          {err && <span class="meta error">{err}</span>}
        </div>
      )}
    </div>
  );
}
