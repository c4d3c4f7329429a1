// Tests: an assistant's test suites in Yao's format (tests/*.jsonl cases,
// src/*_test.ts script tests) with their cases, a run of the suites chosen
// (runs for pass rates, parallel cases, an id filter) with its progress as
// it goes, and the finished run's HTML report, with the other formats
// (JUnit, Yao's JSONL, Markdown, JSON) to download; the user's earlier runs.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import * as api from "./api";
import { Avatar } from "./home";
import { Icon } from "./icons";

interface Props {
  /** The assistant the address names (#/tests/<assistant>[/<run>]). */
  assistantId: string;
  /** The run the address names, "" for none. */
  runId: string;
  assistants: api.Assistant[];
  onOpen: (assistant: string, run: string) => void;
  onError: (e: unknown) => void;
}

export function TestsView({ assistantId, runId, assistants, onOpen, onError }: Props) {
  const [runs, setRuns] = useState<api.TestRun[]>([]);
  const name = (id: string) => assistants.find((a) => a.id === id)?.name ?? id;

  const loadRuns = useCallback(async () => {
    try {
      setRuns(await api.testRuns());
    } catch (e) {
      onError(e);
    }
  }, [onError]);
  useEffect(() => {
    loadRuns();
  }, [loadRuns]);

  return (
    <div class="skills tests">
      <nav class="proposals" aria-label="Assistants to test">
        <h2>Assistants</h2>
        <ul aria-label="Assistants">
          {assistants.map((a) => (
            <li key={a.id} class={a.id === assistantId && !runId ? "current" : ""}>
              <button type="button" class="open row-open" data-assistant={a.id} aria-current={a.id === assistantId && !runId ? "page" : undefined} onClick={() => onOpen(a.id, "")}>
                <Avatar a={a} size={22} />
                <span class="text">
                  <span class="title">{a.name}</span>
                  {!a.available && <span class="meta">does not load</span>}
                </span>
              </button>
            </li>
          ))}
        </ul>
        <h2>Your runs</h2>
        {runs.length === 0 && <p class="hint">No test run yet.</p>}
        <ul aria-label="Your test runs">
          {runs.map((r) => (
            <li key={r.id} class={r.id === runId ? "current" : ""}>
              <button type="button" class="open" aria-current={r.id === runId ? "page" : undefined} onClick={() => onOpen(r.assistant_id, r.id)}>
                <span class="title">{name(r.assistant_id)}</span>
                <span class="meta">
                  {new Date(r.started_at).toLocaleString()} · <RunState run={r} />
                </span>
              </button>
            </li>
          ))}
        </ul>
      </nav>
      <section class="proposal" aria-label="Tests">
        {runId ? (
          <RunView key={runId} id={runId} assistant={name(assistantId)} onDone={loadRuns} onBack={() => onOpen(assistantId, "")} onError={onError} />
        ) : assistantId ? (
          <SuitesView
            key={assistantId}
            assistant={assistants.find((a) => a.id === assistantId)}
            id={assistantId}
            onStarted={(r) => {
              loadRuns();
              onOpen(assistantId, r.id);
            }}
            onError={onError}
          />
        ) : (
          <div class="proposal-detail">
            <h2>Test your assistants</h2>
            <p class="hint">
              Pick an assistant to see its tests: JSONL cases in its <code>tests/</code> folder and <code>*_test.ts</code> script tests next to its hooks, in Yao's format. A run
              goes through the same turns as a chat, as you, and ends with a report. <code>agentbox test</code> runs the same tests from a terminal or CI.
            </p>
          </div>
        )}
      </section>
    </div>
  );
}

function RunState({ run }: { run: api.TestRun }) {
  if (run.state === "running") return <span class="tstate running">running {run.total > 0 && `${run.done}/${run.total}`}</span>;
  if (run.state === "canceled") return <span class="tstate canceled">canceled</span>;
  return <span class={"tstate " + (run.failing ? "failed" : "passed")}>{run.failing ? "failed" : "passed"}</span>;
}

function SuitesView({ id, assistant, onStarted, onError }: { id: string; assistant?: api.Assistant; onStarted: (r: api.TestRun) => void; onError: (e: unknown) => void }) {
  const [listing, setListing] = useState<api.TestListing | null>(null);
  const [chosen, setChosen] = useState<Set<string>>(new Set());
  const [runs, setRuns] = useState(1);
  const [parallel, setParallel] = useState(1);
  const [filter, setFilter] = useState("");
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    (async () => {
      try {
        const l = await api.listTests(id);
        setListing(l);
        setChosen(new Set(l.suites.map((s) => s.name)));
      } catch (e) {
        onError(e);
      }
    })();
  }, [id, onError]);

  if (!listing)
    return (
      <p class="hint" role="status">
        Loading…
      </p>
    );
  const toggle = (name: string) => {
    const next = new Set(chosen);
    if (next.has(name)) next.delete(name);
    else next.add(name);
    setChosen(next);
  };
  const start = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    try {
      const req: api.TestRunRequest = { suites: listing.suites.filter((s) => chosen.has(s.name)).map((s) => s.name), runs, parallel };
      if (filter.trim()) req.run = filter.trim();
      onStarted(await api.startTests(id, req));
    } catch (err) {
      onError(err);
    } finally {
      setBusy(false);
    }
  };
  const cases = listing.suites.filter((s) => chosen.has(s.name)).reduce((n, s) => n + s.cases.length, 0);

  return (
    <div class="proposal-detail tests-detail">
      <header>
        {assistant && <Avatar a={assistant} size={28} />}
        <h2>{assistant?.name ?? id}</h2>
        <span class="meta">{id}</span>
      </header>
      {listing.problems && listing.problems.length > 0 && (
        <div class="reason" role="alert" aria-label="Problems">
          <strong>Test files that do not load</strong>
          <ul>
            {listing.problems.map((p) => (
              <li key={p}>
                <code>{p}</code>
              </li>
            ))}
          </ul>
        </div>
      )}
      {listing.suites.length === 0 ? (
        <p class="hint">
          This assistant has no tests. Put JSONL cases in <code>tests/inputs.jsonl</code> of its folder (one per line: <code>{'{"id": "T001", "input": "Hello", "assert": {"type": "contains", "value": "Hi"}}'}</code>) or{" "}
          <code>Test…(t, ctx)</code> functions in <code>src/*_test.ts</code>.
        </p>
      ) : (
        <form class="run-form" onSubmit={start} aria-label="Run the tests">
          {listing.suites.map((s) => (
            <fieldset key={s.name} class="suite">
              <legend>
                <label>
                  <input type="checkbox" checked={chosen.has(s.name)} onChange={() => toggle(s.name)} /> {s.name}
                </label>
                <span class="meta">
                  {s.kind === "script" ? "script tests" : "cases"} · {s.cases.length}
                </span>
              </legend>
              <table class="cases">
                <tbody>
                  {s.cases.map((c) => (
                    <tr key={c.id}>
                      <td class="cid">{c.id}</td>
                      <td class="cinput">{c.input}</td>
                      <td class="cmeta">
                        {c.dynamic && <span class="tag">simulated user</span>}
                        {c.skip && <span class="tag">skipped</span>}
                        {(c.assertions ?? []).map((a, i) => (
                          <span key={i} class="tag">
                            {a}
                          </span>
                        ))}
                        {c.checkpoints && c.checkpoints.length > 0 && <span class="tag">{c.checkpoints.length} checkpoints</span>}
                        {c.timeout && <span class="tag">{c.timeout}</span>}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </fieldset>
          ))}
          <div class="row">
            <label>
              Runs <input type="number" min={1} max={50} value={runs} onInput={(e) => setRuns(Math.max(1, Number(e.currentTarget.value) || 1))} />
            </label>
            <label>
              Parallel <input type="number" min={1} max={16} value={parallel} onInput={(e) => setParallel(Math.max(1, Number(e.currentTarget.value) || 1))} />
            </label>
            <label class="grow">
              Only ids matching <input type="text" placeholder="a regular expression" value={filter} onInput={(e) => setFilter(e.currentTarget.value)} />
            </label>
            <button type="submit" class="primary" disabled={busy || chosen.size === 0}>
              Run {cases} {cases === 1 ? "test" : "tests"}
              {runs > 1 && ` × ${runs}`}
            </button>
          </div>
        </form>
      )}
    </div>
  );
}

const formats = [
  { format: "junit", ext: "xml", label: "JUnit XML" },
  { format: "jsonl", ext: "jsonl", label: "Yao JSONL" },
  { format: "md", ext: "md", label: "Markdown" },
  { format: "json", ext: "json", label: "JSON" },
];

function RunView({ id, assistant, onDone, onBack, onError }: { id: string; assistant: string; onDone: () => void; onBack: () => void; onError: (e: unknown) => void }) {
  const [run, setRun] = useState<api.TestRun | null>(null);
  const [results, setResults] = useState<{ suite: string; r: api.TestResult }[]>([]);
  const [progress, setProgress] = useState<api.TestEvent | null>(null);
  const [report, setReport] = useState("");
  const ended = useRef(false);

  const finish = useCallback(async () => {
    if (ended.current) return;
    ended.current = true;
    try {
      const r = await api.testRun(id);
      setRun(r);
      setReport(await (await api.testReport(id, "html")).text());
      onDone();
    } catch (e) {
      onError(e);
    }
  }, [id, onDone, onError]);

  useEffect(() => {
    const ctl = new AbortController();
    (async () => {
      try {
        setRun(await api.testRun(id));
        await api.followTests(
          id,
          (ev) => {
            setProgress(ev);
            if (ev.type === "result" && ev.result) {
              const r = ev.result;
              setResults((rs) => [...rs, { suite: ev.suite ?? "", r }]);
            }
          },
          ctl.signal,
        );
        await finish();
      } catch (e) {
        onError(e);
      }
    })();
    return () => ctl.abort();
  }, [id, finish, onError]);

  const cancel = async () => {
    try {
      setRun(await api.cancelTests(id));
    } catch (e) {
      onError(e);
    }
  };
  const download = async (format: string, ext: string) => {
    try {
      const blob = await api.testReport(id, format);
      const a = document.createElement("a");
      a.href = URL.createObjectURL(blob);
      a.download = `${id}.${ext}`;
      a.click();
      setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
    } catch (e) {
      onError(e);
    }
  };

  if (!run)
    return (
      <p class="hint" role="status">
        Loading…
      </p>
    );
  const p = progress ?? run;
  const running = run.state === "running" && !report;
  return (
    <div class="proposal-detail tests-detail run-detail">
      <header>
        <button type="button" class="icon" aria-label="Back to the tests" onClick={onBack}>
          <Icon name="back" />
        </button>
        <h2>{assistant}</h2>
        <span class="meta">
          {new Date(run.started_at).toLocaleString()} · <RunState run={running ? { ...run, ...p, state: "running" } : run} />
        </span>
      </header>
      <div class="progress-line" role="status" aria-label="Progress">
        <progress max={Math.max(p.total, 1)} value={p.done} />
        <span>
          {p.done}/{p.total} done · <span class="passed">{p.passed} passed</span> · <span class="failed">{p.failed} failed</span>
          {run.summary && ` · ${(run.summary.duration_ms / 1000).toFixed(1)}s`}
        </span>
        {running && (
          <button type="button" onClick={cancel}>
            Cancel
          </button>
        )}
      </div>
      {run.error && (
        <p class="reason" role="alert">
          {run.error}
        </p>
      )}
      {running || !report ? (
        <ul class="live-results" aria-label="Results so far">
          {results.map(({ suite, r }, i) => (
            <li key={i} class={"tresult " + r.status}>
              <span class={"tstate " + r.status}>{r.status}</span> <strong>{r.id}</strong>
              {r.run ? <span class="meta"> run {r.run}</span> : null} <span class="meta">{suite}</span> <span class="meta">{(r.duration_ms / 1000).toFixed(1)}s</span>
              {r.error && <div class="terror">{r.error}</div>}
            </li>
          ))}
        </ul>
      ) : (
        <>
          <div class="row downloads" aria-label="Download the report">
            <span class="meta">Download:</span>
            {formats.map((f) => (
              <button key={f.format} type="button" onClick={() => download(f.format, f.ext)}>
                <Icon name="download" size={15} /> {f.label}
              </button>
            ))}
          </div>
          {/* The report is the server's own page, shown without this
              page's origin: it runs its script, nothing else. */}
          <iframe class="report" title="Test report" sandbox="allow-scripts" srcdoc={report} />
        </>
      )}
    </div>
  );
}
