// Skills: the assistants' own (their folders' skills/), the ones agents
// proposed for the user (pending first, or all) with one proposal's
// SKILL.md, files and test outcome, the decision (approve, or reject with
// a reason) and another test run, and the user's approved skills.
import { useCallback, useEffect, useState } from "preact/hooks";
import * as api from "./api";
import { Avatar } from "./home";
import { Icon } from "./icons";
import { usageLine } from "./turn";

interface Props {
  proposalId: string;
  assistants: api.Assistant[];
  onOpen: (id: string) => void;
  onError: (e: unknown) => void;
  onChanged: () => void;
}

export function SkillsView({ proposalId, assistants, onOpen, onError, onChanged }: Props) {
  const [filter, setFilter] = useState<"pending" | "all">("pending");
  const [list, setList] = useState<api.SkillProposal[]>([]);
  const [mine, setMine] = useState<api.UserSkill[]>([]);
  const name = (id: string) => assistants.find((a) => a.id === id)?.name ?? id;
  const own = assistants.flatMap((a) => (a.skills ?? []).map((sk) => ({ a, sk })));

  const load = useCallback(async () => {
    try {
      const [ps, us] = await Promise.all([api.proposals(filter === "pending" ? "pending" : ""), api.userSkills()]);
      setList(ps);
      setMine(us);
    } catch (e) {
      onError(e);
    }
  }, [filter, onError]);

  useEffect(() => {
    load();
  }, [load]);

  const changed = () => {
    load();
    onChanged();
  };

  const remove = async (s: api.UserSkill) => {
    if (!confirm(`Remove your skill "${s.name}" of ${name(s.assistant_id)}? It is not installed from the next turn on.`)) return;
    try {
      await api.removeSkill(s.assistant_id, s.name);
      changed();
    } catch (e) {
      onError(e);
    }
  };

  return (
    <div class="skills">
      <nav class="proposals" aria-label="Skill proposals">
        <div role="tablist" class="tabs" aria-label="Which proposals">
          <button type="button" role="tab" aria-selected={filter === "pending"} onClick={() => setFilter("pending")}>
            Waiting
          </button>
          <button type="button" role="tab" aria-selected={filter === "all"} onClick={() => setFilter("all")}>
            All
          </button>
        </div>
        {list.length === 0 && <p class="hint">{filter === "pending" ? "No skill waits for your decision." : "No skill was proposed yet."}</p>}
        <ul class="plist" aria-label="Proposals">
          {list.map((p) => (
            <li key={p.id} class={p.id === proposalId ? "current" : ""}>
              <button type="button" class="open" aria-current={p.id === proposalId ? "page" : undefined} onClick={() => onOpen(p.id)}>
                <span class="title">{p.name}</span>
                <span class="meta">
                  {name(p.assistant_id)} · <span class={"pstatus " + p.status}>{p.status}</span>
                  {p.test && ` · test ${p.test.status}`}
                </span>
              </button>
            </li>
          ))}
        </ul>
        <h2>Your skills</h2>
        {mine.length === 0 && <p class="hint">None approved yet.</p>}
        <ul class="mine" aria-label="Your skills">
          {mine.map((s) => (
            <li key={s.assistant_id + "/" + s.name}>
              <button type="button" class="open" onClick={() => onOpen(s.proposal_id)}>
                <span class="title">{s.name}</span>
                <span class="meta">
                  {name(s.assistant_id)}
                  {s.shadowed && " · not installed: the assistant's own skill of that name wins"}
                </span>
              </button>
              <button type="button" class="icon" aria-label={`Remove ${s.name}`} onClick={() => remove(s)}>
                <Icon name="trash" size={16} />
              </button>
            </li>
          ))}
        </ul>
        <h2>Built into the assistants</h2>
        {own.length === 0 && <p class="hint">No assistant has skills of its own.</p>}
        <ul class="own" aria-label="The assistants' skills">
          {own.map(({ a, sk }) => (
            <li key={a.id + "/" + sk.name}>
              <span class="open static">
                <span class="title">{sk.name}</span>
                <span class="meta">{a.name}</span>
              </span>
            </li>
          ))}
        </ul>
      </nav>
      <section class="proposal" aria-label="Proposal">
        {proposalId ? (
          <ProposalView key={proposalId} id={proposalId} assistant={name} onChanged={changed} onError={onError} />
        ) : (
          <Overview assistants={assistants} />
        )}
      </section>
    </div>
  );
}

/** Overview: what skills are, and each assistant's own with what it is
 * for. */
function Overview({ assistants }: { assistants: api.Assistant[] }) {
  const withSkills = assistants.filter((a) => (a.skills ?? []).length > 0);
  return (
    <div class="overview">
      <h2>Skills</h2>
      <p class="hint">
        A skill is a folder of instructions (and scripts) an agent loads when a task calls for it. Assistants bring their own; agents whose assistant allows it also propose
        new ones as they work, and a proposal is used only once you approve it.
      </p>
      {withSkills.map((a) => (
        <section key={a.id} class="own-skills" aria-label={`Skills of ${a.name}`}>
          <h3>
            <Avatar a={a} size={24} /> {a.name}
          </h3>
          <ul class="skill-cards">
            {a.skills.map((sk) => (
              <li key={sk.name} class="skill-card">
                <span class="skill-name">{sk.name}</span>
                <p>{sk.description}</p>
              </li>
            ))}
          </ul>
        </section>
      ))}
    </div>
  );
}

function ProposalView({ id, assistant, onChanged, onError }: { id: string; assistant: (id: string) => string; onChanged: () => void; onError: (e: unknown) => void }) {
  const [p, setP] = useState<api.SkillProposal | null>(null);
  const [missing, setMissing] = useState(false);
  const [reason, setReason] = useState("");
  const [prompt, setPrompt] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const load = useCallback(async () => {
    try {
      setP(await api.proposal(id));
    } catch (e) {
      if (e instanceof api.ApiError && e.status === 404) setMissing(true);
      else onError(e);
    }
  }, [id, onError]);

  useEffect(() => {
    load();
  }, [load]);

  // A pending proposal is polled: its test turn starts once the agent's
  // turn ended, and runs in the background.
  const testing = p?.test?.status === "running";
  const pendingNow = p?.status === "pending";
  useEffect(() => {
    if (!pendingNow) return;
    const timer = setInterval(load, testing ? 1000 : 3000);
    return () => clearInterval(timer);
  }, [pendingNow, testing, load]);
  useEffect(() => {
    if (p && !testing) onChanged();
  }, [testing]);

  if (missing) return <p class="hint">There is no proposal {id}.</p>;
  if (!p) return <p class="hint" role="status">Loading…</p>;

  const act = async (f: () => Promise<api.SkillProposal>) => {
    setBusy(true);
    try {
      setP(await f());
      onChanged();
    } catch (e) {
      onError(e);
    } finally {
      setBusy(false);
    }
  };
  const pending = p.status === "pending";
  const testPrompt = prompt ?? p.test?.prompt ?? p.test_prompt ?? "";

  return (
    <article class="proposal-detail">
      <header>
        <h2>{p.name}</h2>
        <span class={"pstatus " + p.status} aria-label="Status">
          {p.status}
        </span>
      </header>
      <p class="meta">
        Proposed for {assistant(p.assistant_id)} in chat{" "}
        <a href={"#/c/" + encodeURIComponent(p.chat_id)}>{p.chat_id}</a> on {new Date(p.created_at).toLocaleString()}
      </p>
      <p class="description">{p.description}</p>
      {p.reason && (
        <p class="reason" aria-label="Reason">
          <strong>{p.status === "rejected" ? "Rejected: " : "Note: "}</strong>
          {p.reason}
        </p>
      )}

      <section class="test" aria-label="Test">
        <h3>Test</h3>
        {p.test ? <TestOutcome t={p.test} /> : <p class="hint">Not tested yet.</p>}
        {pending && (
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              act(() => api.testProposal(p.id, testPrompt));
            }}
          >
            <label for="test-prompt">Test prompt</label>
            <input id="test-prompt" value={testPrompt} onInput={(e) => setPrompt(e.currentTarget.value)} placeholder="A request that should use the skill" />
            <button type="submit" disabled={busy || testing || !testPrompt.trim()}>
              {testing ? "Testing…" : "Run test"}
            </button>
          </form>
        )}
      </section>

      {pending && (
        <section class="decide" aria-label="Decision">
          <button type="button" class="primary" disabled={busy} onClick={() => act(() => api.approveProposal(p.id))}>
            Approve
          </button>
          <form
            onSubmit={(e) => {
              e.preventDefault();
              act(() => api.rejectProposal(p.id, reason));
            }}
          >
            <label for="reject-reason">Reason to reject</label>
            <textarea id="reject-reason" rows={2} value={reason} required onInput={(e) => setReason(e.currentTarget.value)} />
            <button type="submit" disabled={busy || !reason.trim()}>
              Reject
            </button>
          </form>
        </section>
      )}

      <section aria-label="SKILL.md">
        <h3>SKILL.md</h3>
        <pre class="skill-md">{p.skill_md}</pre>
      </section>
      {(p.files ?? []).map((f) => (
        <details key={f.path} class="file">
          <summary>{f.path}</summary>
          <pre>{f.content}</pre>
        </details>
      ))}
    </article>
  );
}

function TestOutcome({ t }: { t: api.SkillTest }) {
  if (t.status === "running") {
    return (
      <p class="working" role="status">
        A test turn runs with “{t.prompt}”…
      </p>
    );
  }
  return (
    <div class={"outcome " + t.status} aria-label="Test outcome">
      <p>
        <strong>{t.status === "completed" ? "Completed" : "Failed"}</strong> with “{t.prompt}” ·{" "}
        <span class="loaded">{t.skill_loaded ? "the skill was loaded" : "the skill was not loaded"}</span> ·{" "}
        <span class="used">{t.skill_used ? "and used" : "not used"}</span>
      </p>
      {t.error && (
        <p class="msg error" role="alert">
          {t.error.code}: {t.error.message}
        </p>
      )}
      {t.tool_calls && t.tool_calls.length > 0 && <p class="calls">Tool calls: {t.tool_calls.map((c) => c.name + (c.is_error ? " (failed)" : "")).join(", ")}</p>}
      {t.answer && <pre class="answer">{t.answer}</pre>}
      <p class="usage">{usageLine({ usage: t.usage })}</p>
    </div>
  );
}
