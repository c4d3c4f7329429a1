// The page: sign-in with a bearer token (kept in the browser), the user's
// chats in a sidebar, the open chat (a new one starts on the assistants'
// cards), and its workspace and terminal in a side panel; or the skills.
// Below a laptop's width the side panel slides over the chat, below a
// tablet's the sidebar does too. Keyboard shortcuts are listed with "?".
// The tests view runs the assistants' tests.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import * as api from "./api";
import { ChatView } from "./chat";
import { Files } from "./files";
import { Avatar, colourAssistants } from "./home";
import { Icon } from "./icons";
import { mod, Shortcuts } from "./shortcuts";
import { SkillsView } from "./skills";
import { TerminalPanel } from "./terminal";
import { DesktopPanel } from "./desktop";
import { PreviewPanel } from "./previews";
import { TestsView } from "./tests";

/** The chat the address names: #/c/<chat id>. */
function chatFromHash(): string {
  const m = /^#\/c\/([^/]+)$/.exec(location.hash);
  return m ? decodeURIComponent(m[1]) : "";
}

/** The skills view the address names: #/skills, or #/skills/<proposal
 * id>; null for the chats. */
function skillsFromHash(): string | null {
  const m = /^#\/skills(?:\/([^/]+))?$/.exec(location.hash);
  return m ? decodeURIComponent(m[1] ?? "") : null;
}

/** The tests view the address names: #/tests, #/tests/<assistant> or
 * #/tests/<assistant>/<run id>; null for the chats. */
function testsFromHash(): { assistant: string; run: string } | null {
  const m = /^#\/tests(?:\/([^/]+)(?:\/([^/]+))?)?$/.exec(location.hash);
  return m ? { assistant: decodeURIComponent(m[1] ?? ""), run: decodeURIComponent(m[2] ?? "") } : null;
}

const assistantKey = "agentbox.assistant";
const sideKey = "agentbox.side";

// At this width and above the side panel is a column beside the chat;
// below it slides over the chat.
const wideQuery = "(min-width: 1200px)";
const wide = () => window.matchMedia(wideQuery).matches;

/** typing reports a key press meant for a text field. */
const typing = (e: KeyboardEvent) => {
  const t = e.target as HTMLElement | null;
  return !!t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT" || t.isContentEditable || !!t.closest?.(".xterm"));
};

export function App() {
  const [auth, setAuth] = useState<"checking" | "login" | "ok">("checking");
  const [assistants, setAssistants] = useState<api.Assistant[]>([]);
  const [chats, setChats] = useState<api.ChatInfo[]>([]);
  const [chatId, setChatId] = useState(chatFromHash());
  // viewKey names the chat view: a new one for every chat opened, the
  // same one when a new chat gets its id from its first message (its turn
  // streams on in it).
  const [viewKey, setViewKey] = useState(chatId || "new");
  const created = useRef("");
  const [skills, setSkills] = useState(skillsFromHash());
  const [tests, setTests] = useState(testsFromHash());
  const [pending, setPending] = useState(0);
  const [error, setError] = useState("");
  const [panel, setPanel] = useState<"files" | "terminal" | "desktop" | "preview">("files");
  const [filesVersion, setFilesVersion] = useState(0);
  const [selected, setSelected] = useState(localStorage.getItem(assistantKey) ?? "");
  const [navOpen, setNavOpen] = useState(false);
  const [sideOpen, setSideOpen] = useState(localStorage.getItem(sideKey) !== "0" && wide());
  const [help, setHelp] = useState(false);

  const fail = useCallback((e: unknown) => {
    if (e instanceof api.ApiError && e.status === 401) {
      setAuth("login");
      return;
    }
    if (e instanceof DOMException && e.name === "AbortError") return;
    setError(e instanceof Error ? e.message : String(e));
  }, []);

  const loadChats = useCallback(async () => {
    try {
      setChats(await api.chats());
    } catch (e) {
      fail(e);
    }
  }, [fail]);

  const loadPending = useCallback(async () => {
    try {
      setPending((await api.proposals("pending")).length);
    } catch {
      setPending(0); // a server that keeps no proposals
    }
  }, []);

  const load = useCallback(async () => {
    try {
      const [as, cs] = await Promise.all([api.assistants(), api.chats()]);
      colourAssistants(as);
      setAssistants(as);
      setChats(cs);
      setAuth("ok");
      setError("");
      loadPending();
    } catch (e) {
      if (e instanceof api.ApiError && e.status === 401) setAuth("login");
      else {
        setAuth("ok");
        fail(e);
      }
    }
  }, [fail]);

  // Crossing the laptop width closes the side panel (it would cover the
  // chat) or brings it back as the user left it.
  useEffect(() => {
    const mql = window.matchMedia(wideQuery);
    const onChange = () => setSideOpen(mql.matches && localStorage.getItem(sideKey) !== "0");
    mql.addEventListener("change", onChange);
    return () => mql.removeEventListener("change", onChange);
  }, []);

  useEffect(() => {
    load();
    const onHash = () => {
      const id = chatFromHash();
      setChatId(id);
      if (id !== created.current) setViewKey(id || "new-" + Date.now());
      setSkills(skillsFromHash());
      setTests(testsFromHash());
    };
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, [load]);

  const open = (id: string) => {
    location.hash = id ? "#/c/" + encodeURIComponent(id) : "#/";
    created.current = "";
    setChatId(id);
    setViewKey(id || "new-" + Date.now());
    setSkills(null);
    setTests(null);
    setNavOpen(false);
    if (!wide()) setSideOpen(false);
  };
  const openSkills = (id: string) => {
    location.hash = "#/skills" + (id ? "/" + encodeURIComponent(id) : "");
    setSkills(id);
    setTests(null);
    setNavOpen(false);
  };
  const openTests = (assistant: string, run: string) => {
    location.hash = "#/tests" + (assistant ? "/" + encodeURIComponent(assistant) + (run ? "/" + encodeURIComponent(run) : "") : "");
    setTests({ assistant, run });
    setSkills(null);
    setNavOpen(false);
  };
  const choose = (id: string) => {
    setSelected(id);
    localStorage.setItem(assistantKey, id);
  };
  const toggleSide = () => {
    localStorage.setItem(sideKey, sideOpen ? "0" : "1");
    setSideOpen(!sideOpen);
  };
  const showDesktop = () => {
    setPanel("desktop");
    setSideOpen(true);
  };
  const showPreview = () => {
    setPanel("preview");
    setSideOpen(true);
  };

  // The shortcuts the "?" overlay lists.
  // (The handler is the newest render's: a key pressed right after
  // another sees what the first one changed.)
  const onKey = useRef<(e: KeyboardEvent) => void>(() => {});
  onKey.current = (e: KeyboardEvent) => {
    if ((e.key === "?" && !typing(e) && !e.ctrlKey && !e.metaKey) || (e.key === "/" && mod(e))) {
      e.preventDefault();
      setHelp((h) => !h);
    } else if (mod(e) && e.shiftKey && e.key.toLowerCase() === "o") {
      e.preventDefault();
      open("");
      setTimeout(() => document.getElementById("message")?.focus());
    } else if (e.key === "Escape" && e.shiftKey) {
      e.preventDefault();
      document.getElementById("message")?.focus();
    } else if (e.altKey && (e.key === "ArrowDown" || e.key === "ArrowUp") && assistants.length > 0) {
      e.preventDefault();
      const cur = Math.max(0, assistants.findIndex((a) => a.id === (selected || assistants[0].id)));
      const next = assistants[(cur + (e.key === "ArrowDown" ? 1 : assistants.length - 1)) % assistants.length];
      choose(next.id);
      if (chatFromHash() || skillsFromHash() !== null || testsFromHash() !== null) open("");
    } else if (e.key === "Escape" && (help || navOpen)) {
      setHelp(false);
      setNavOpen(false);
    }
  };
  useEffect(() => {
    const f = (e: KeyboardEvent) => onKey.current(e);
    window.addEventListener("keydown", f);
    return () => window.removeEventListener("keydown", f);
  }, []);

  if (auth === "checking")
    return (
      <div class="splash" role="status">
        Loading…
      </div>
    );
  if (auth === "login") return <Login onSignIn={load} />;

  const current = chats.find((c) => c.id === chatId);
  const inChat = skills === null && tests === null;
  // A chat started on this page is the chosen assistant's until the list
  // has it.
  const owner = assistants.find((a) => a.id === (current?.assistant_id ?? (chatId && chatId === created.current ? selected || assistants[0]?.id : "")));
  // The workspace and terminal are a sandboxed assistant's.
  const showSide = inChat && !!chatId && (owner?.sandboxed ?? true);
  const cls = ["app", navOpen && "nav-open", showSide && sideOpen && "side-open"].filter(Boolean).join(" ");
  return (
    <div class={cls}>
      <aside class="sidebar" aria-label="Sidebar">
        <div class="brand">
          <Logo />
          <span>agentbox</span>
          <button type="button" class="icon only-narrow" aria-label="Close the sidebar" onClick={() => setNavOpen(false)}>
            <Icon name="close" />
          </button>
        </div>
        <ChatList chats={chats} assistants={assistants} current={inChat ? chatId : ""} onOpen={open} onChanged={loadChats} onError={fail} />
        <div class="sidebar-foot">
          <button type="button" class="side-link skills-link" aria-current={skills !== null ? "page" : undefined} onClick={() => openSkills("")}>
            <Icon name="skills" />
            <span>Skills</span>
            {pending > 0 && (
              <span class="badge" aria-label={`${pending} waiting for your decision`}>
                {pending}
              </span>
            )}
          </button>
          <button type="button" class="side-link tests-link" aria-current={tests !== null ? "page" : undefined} onClick={() => openTests(tests?.assistant ?? "", "")}>
            <Icon name="flask" />
            <span>Tests</span>
          </button>
          <button type="button" class="side-link" onClick={() => setHelp(true)} aria-haspopup="dialog">
            <Icon name="keyboard" />
            <span>Keyboard shortcuts</span>
          </button>
          {api.getToken() && (
            <button
              type="button"
              class="side-link"
              onClick={() => {
                api.setToken("");
                setAuth("login");
              }}
            >
              <Icon name="logout" />
              <span>Sign out</span>
            </button>
          )}
        </div>
      </aside>
      <div class="scrim nav-scrim" onClick={() => setNavOpen(false)} aria-hidden="true" />
      <div class="main">
        <header class="top">
          <button type="button" class="icon only-narrow" aria-label="Open the sidebar" aria-expanded={navOpen} onClick={() => setNavOpen(true)}>
            <Icon name="menu" />
          </button>
          <div class="heading">
            {tests !== null ? (
              <h1>Tests</h1>
            ) : !inChat ? (
              <h1>Skills</h1>
            ) : current || chatId ? (
              <>
                {owner && <Avatar a={owner} size={24} />}
                <h1 title={current?.title}>{current?.title || "New chat"}</h1>
                {owner && <span class="who">{owner.name}</span>}
              </>
            ) : (
              <h1>New chat</h1>
            )}
          </div>
          <button type="button" class="icon new-chat-top only-narrow" aria-label="New chat" onClick={() => open("")}>
            <Icon name="plus" />
          </button>
          {showSide && !!owner?.previews?.length && (
            <button type="button" class="desktop-button preview-button" aria-label="Open preview" aria-controls="side" title="What the agent serves in its sandbox" onClick={showPreview}>
              <Icon name="globe" size={16} /> Preview
            </button>
          )}
          {showSide && owner?.desktop && (
            <button type="button" class="desktop-button" aria-label="Desktop" aria-controls="side" title="The sandbox's desktop, live" onClick={showDesktop}>
              <Icon name="monitor" size={16} /> Desktop
            </button>
          )}
          {showSide && (
            <button type="button" class="icon" aria-label="Workspace and terminal" aria-expanded={sideOpen} aria-controls="side" title="Workspace and terminal" onClick={toggleSide}>
              <Icon name="panel" />
            </button>
          )}
        </header>
        {error && (
          <div class="banner" role="alert">
            <span>{error}</span>
            <button type="button" class="icon" aria-label="Dismiss the error" onClick={() => setError("")}>
              <Icon name="close" size={16} />
            </button>
          </div>
        )}
        {tests !== null ? (
          <main class="skills-main" aria-label="Tests">
            <TestsView assistantId={tests.assistant} runId={tests.run} assistants={assistants} onOpen={openTests} onError={fail} />
          </main>
        ) : skills !== null ? (
          <main class="skills-main" aria-label="Skills">
            <SkillsView proposalId={skills} assistants={assistants} onOpen={openSkills} onError={fail} onChanged={loadPending} />
          </main>
        ) : (
          <main class="chat" aria-label="Chat">
            <ChatView
              key={viewKey}
              chatId={chatId}
              info={current}
              assistants={assistants}
              selected={selected}
              onSelect={choose}
              onCreated={(id) => {
                created.current = id;
                location.hash = "#/c/" + encodeURIComponent(id);
                setChatId(id);
              }}
              onOpen={open}
              onChanged={loadChats}
              onTool={() => setFilesVersion((v) => v + 1)}
              onSkill={loadPending}
              onError={fail}
            />
          </main>
        )}
      </div>
      {showSide && (
        <>
          <div class="scrim side-scrim" onClick={() => setSideOpen(false)} aria-hidden="true" />
          <aside class="side" id="side" aria-label="Workspace and terminal">
            <div role="tablist" class="tabs" aria-label="Side panel">
              <button type="button" role="tab" id="tab-files" aria-selected={panel === "files"} aria-controls="panel-files" onClick={() => setPanel("files")}>
                <Icon name="folder" size={16} /> Files
              </button>
              <button type="button" role="tab" id="tab-terminal" aria-selected={panel === "terminal"} aria-controls="panel-terminal" onClick={() => setPanel("terminal")}>
                <Icon name="terminal" size={16} /> Terminal
              </button>
              {owner?.desktop && (
                <button type="button" role="tab" id="tab-desktop" aria-selected={panel === "desktop"} aria-controls="panel-desktop" onClick={() => setPanel("desktop")}>
                  <Icon name="monitor" size={16} /> Desktop
                </button>
              )}
              {!!owner?.previews?.length && (
                <button type="button" role="tab" id="tab-preview" aria-selected={panel === "preview"} aria-controls="panel-preview" onClick={() => setPanel("preview")}>
                  <Icon name="globe" size={16} /> Preview
                </button>
              )}
              <span class="grow" />
              <button type="button" class="icon" aria-label="Close the side panel" onClick={toggleSide}>
                <Icon name="close" />
              </button>
            </div>
            <section id="panel-files" role="tabpanel" aria-labelledby="tab-files" hidden={panel !== "files"}>
              <Files key={chatId} chatId={chatId} version={filesVersion} onError={fail} onChanged={loadChats} />
            </section>
            <section id="panel-terminal" role="tabpanel" aria-labelledby="tab-terminal" hidden={panel !== "terminal"}>
              <TerminalPanel key={chatId} chatId={chatId} visible={panel === "terminal" && sideOpen} onError={fail} />
            </section>
            {owner?.desktop && (
              <section id="panel-desktop" role="tabpanel" aria-labelledby="tab-desktop" hidden={panel !== "desktop"}>
                <DesktopPanel key={chatId} chatId={chatId} visible={panel === "desktop" && sideOpen} onError={fail} />
              </section>
            )}
            {!!owner?.previews?.length && (
              <section id="panel-preview" role="tabpanel" aria-labelledby="tab-preview" hidden={panel !== "preview"}>
                <PreviewPanel key={chatId} chatId={chatId} declared={owner.previews} visible={panel === "preview" && sideOpen} onError={fail} />
              </section>
            )}
          </aside>
        </>
      )}
      {help && <Shortcuts onClose={() => setHelp(false)} />}
    </div>
  );
}

/** Logo is agentbox's mark: a box with a prompt in it (also the page's
 * icon, in index.html). */
function Logo() {
  return (
    <svg class="logo" width="26" height="26" viewBox="0 0 32 32" aria-hidden="true">
      <rect x="2" y="2" width="28" height="28" rx="8" fill="#2f5bd3" />
      <path d="M9 12l5 4-5 4M16 21h7" fill="none" stroke="#fff" stroke-width="2.6" stroke-linecap="round" stroke-linejoin="round" />
    </svg>
  );
}

function Login({ onSignIn }: { onSignIn: () => void }) {
  const [token, setTokenValue] = useState("");
  return (
    <div class="login-page">
      <form
        class="login"
        onSubmit={(e) => {
          e.preventDefault();
          api.setToken(token.trim());
          onSignIn();
        }}
      >
        <h1>
          <Logo /> agentbox
        </h1>
        <p>This server wants a bearer token. It is kept in this browser until you sign out.</p>
        <label for="token">Bearer token</label>
        <input id="token" type="password" autocomplete="current-password" value={token} onInput={(e) => setTokenValue(e.currentTarget.value)} autofocus required />
        {api.getToken() && <p role="alert">That token was not accepted.</p>}
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
    </div>
  );
}

/** group names the part of the chat list a chat falls in by when it was
 * last used. */
function group(updated: string, now: Date): string {
  const d = new Date(updated);
  const day = (x: Date) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const days = Math.round((day(now) - day(d)) / 86_400_000);
  if (days <= 0) return "Today";
  if (days === 1) return "Yesterday";
  if (days < 7) return "Previous 7 days";
  if (days < 30) return "Previous 30 days";
  return "Older";
}

interface ChatListProps {
  chats: api.ChatInfo[];
  assistants: api.Assistant[];
  current: string;
  onOpen: (id: string) => void;
  onChanged: () => void;
  onError: (e: unknown) => void;
}

function ChatList({ chats, assistants, current, onOpen, onChanged, onError }: ChatListProps) {
  const [editing, setEditing] = useState("");
  const [title, setTitle] = useState("");
  const byId = (id?: string) => assistants.find((a) => a.id === id);

  const rename = async (id: string) => {
    try {
      await api.renameChat(id, title);
      setEditing("");
      onChanged();
    } catch (e) {
      onError(e);
    }
  };
  const remove = async (c: api.ChatInfo) => {
    if (!confirm(`Delete the chat "${c.title || c.id}" with its history and workspace?`)) return;
    try {
      await api.deleteChat(c.id);
      if (c.id === current) onOpen("");
      onChanged();
    } catch (e) {
      onError(e);
    }
  };

  const now = new Date();
  const groups: { name: string; chats: api.ChatInfo[] }[] = [];
  for (const c of chats) {
    const g = group(c.updated, now);
    if (groups.at(-1)?.name !== g) groups.push({ name: g, chats: [] });
    groups.at(-1)!.chats.push(c);
  }

  return (
    <nav class="chats" aria-label="Chats">
      <button type="button" class="new-chat" onClick={() => onOpen("")}>
        <Icon name="plus" />
        <span>New chat</span>
      </button>
      {chats.length === 0 && <p class="hint">Your chats will be listed here.</p>}
      {groups.map((g) => (
        <section key={g.name} aria-label={g.name}>
          <h2>{g.name}</h2>
          <ul>
            {g.chats.map((c) => (
              <li key={c.id} class={c.id === current ? "current" : ""}>
                {editing === c.id ? (
                  <form
                    class="rename"
                    onSubmit={(e) => {
                      e.preventDefault();
                      rename(c.id);
                    }}
                  >
                    <input aria-label="New title" value={title} onInput={(e) => setTitle(e.currentTarget.value)} onKeyDown={(e) => e.key === "Escape" && setEditing("")} autofocus />
                    <button type="submit">Save</button>
                  </form>
                ) : (
                  <>
                    <button type="button" class="open" aria-current={c.id === current ? "page" : undefined} onClick={() => onOpen(c.id)}>
                      <Avatar a={byId(c.assistant_id)} size={22} />
                      <span class="text">
                        <span class="title">{c.title || "Untitled chat"}</span>
                        <span class="meta">
                          {byId(c.assistant_id)?.name ?? c.assistant_id}
                          {c.running && <span class="running" aria-label="running" />}
                        </span>
                      </span>
                    </button>
                    <span class="row-actions">
                      <button
                        type="button"
                        class="icon"
                        aria-label={`Rename ${c.title || c.id}`}
                        title="Rename"
                        onClick={() => {
                          setEditing(c.id);
                          setTitle(c.title ?? "");
                        }}
                      >
                        <Icon name="edit" size={15} />
                      </button>
                      <button type="button" class="icon" aria-label={`Delete ${c.title || c.id}`} title="Delete" onClick={() => remove(c)}>
                        <Icon name="trash" size={15} />
                      </button>
                    </span>
                  </>
                )}
              </li>
            ))}
          </ul>
        </section>
      ))}
    </nav>
  );
}
