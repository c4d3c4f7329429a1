// The page: sign-in with a bearer token (kept in the browser), the user's
// chats, the open chat, and its workspace and terminal; or the skills
// agents proposed, to approve or reject.
import { useCallback, useEffect, useState } from "preact/hooks";
import * as api from "./api";
import { ChatView } from "./chat";
import { Files } from "./files";
import { SkillsView } from "./skills";
import { TerminalPanel } from "./terminal";

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

export function App() {
  const [auth, setAuth] = useState<"checking" | "login" | "ok">("checking");
  const [assistants, setAssistants] = useState<api.Assistant[]>([]);
  const [chats, setChats] = useState<api.ChatInfo[]>([]);
  const [chatId, setChatId] = useState(chatFromHash());
  const [skills, setSkills] = useState(skillsFromHash());
  const [pending, setPending] = useState(0);
  const [error, setError] = useState("");
  const [panel, setPanel] = useState<"files" | "terminal">("files");
  const [filesVersion, setFilesVersion] = useState(0);

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

  useEffect(() => {
    load();
    const onHash = () => {
      setChatId(chatFromHash());
      setSkills(skillsFromHash());
    };
    window.addEventListener("hashchange", onHash);
    return () => window.removeEventListener("hashchange", onHash);
  }, [load]);

  const open = (id: string) => {
    location.hash = id ? "#/c/" + encodeURIComponent(id) : "#/";
    setChatId(id);
    setSkills(null);
  };
  const openSkills = (id: string) => {
    location.hash = "#/skills" + (id ? "/" + encodeURIComponent(id) : "");
    setSkills(id);
  };

  if (auth === "checking") return <div class="splash" role="status">Loading…</div>;
  if (auth === "login") return <Login onSignIn={load} />;

  const current = chats.find((c) => c.id === chatId);
  return (
    <div class="app">
      <header class="top">
        <h1>agentbox</h1>
        {error && (
          <div class="banner" role="alert">
            {error}
            <button type="button" class="icon" aria-label="Dismiss the error" onClick={() => setError("")}>
              ×
            </button>
          </div>
        )}
        <button type="button" class="skills-link" aria-current={skills !== null ? "page" : undefined} onClick={() => openSkills("")}>
          Skills{pending > 0 && <span class="badge" aria-label={`${pending} waiting for your decision`}> {pending}</span>}
        </button>
        {api.getToken() && (
          <button
            type="button"
            onClick={() => {
              api.setToken("");
              setAuth("login");
            }}
          >
            Sign out
          </button>
        )}
      </header>
      <ChatList chats={chats} assistants={assistants} current={skills === null ? chatId : ""} onOpen={open} onChanged={loadChats} onError={fail} />
      {skills !== null ? (
        <main class="skills-main" aria-label="Skills">
          <SkillsView proposalId={skills} assistants={assistants} onOpen={openSkills} onError={fail} onChanged={loadPending} />
        </main>
      ) : (
        <>
      <main class="chat" aria-label="Chat">
        <ChatView
          key={chatId || "new"}
          chatId={chatId}
          info={current}
          assistants={assistants}
          onCreated={(id) => open(id)}
          onChanged={loadChats}
          onTool={() => setFilesVersion((v) => v + 1)}
          onSkill={loadPending}
          onError={fail}
        />
      </main>
      <aside class="side" aria-label="Workspace and terminal">
        <div role="tablist" class="tabs" aria-label="Side panel">
          <button type="button" role="tab" id="tab-files" aria-selected={panel === "files"} aria-controls="panel-files" onClick={() => setPanel("files")}>
            Files
          </button>
          <button type="button" role="tab" id="tab-terminal" aria-selected={panel === "terminal"} aria-controls="panel-terminal" onClick={() => setPanel("terminal")}>
            Terminal
          </button>
        </div>
        <section id="panel-files" role="tabpanel" aria-labelledby="tab-files" hidden={panel !== "files"}>
          {chatId ? <Files key={chatId} chatId={chatId} version={filesVersion} onError={fail} onChanged={loadChats} /> : <p class="hint">Start or open a chat to see its workspace.</p>}
        </section>
        <section id="panel-terminal" role="tabpanel" aria-labelledby="tab-terminal" hidden={panel !== "terminal"}>
          {chatId ? <TerminalPanel key={chatId} chatId={chatId} visible={panel === "terminal"} onError={fail} /> : <p class="hint">Start or open a chat to open a terminal in its sandbox.</p>}
        </section>
      </aside>
        </>
      )}
    </div>
  );
}

function Login({ onSignIn }: { onSignIn: () => void }) {
  const [token, setTokenValue] = useState("");
  return (
    <form
      class="login"
      onSubmit={(e) => {
        e.preventDefault();
        api.setToken(token.trim());
        onSignIn();
      }}
    >
      <h1>agentbox</h1>
      <p>This server wants a bearer token. It is kept in this browser until you sign out.</p>
      <label for="token">Bearer token</label>
      <input id="token" type="password" autocomplete="current-password" value={token} onInput={(e) => setTokenValue(e.currentTarget.value)} autofocus required />
      {api.getToken() && <p role="alert">That token was not accepted.</p>}
      <button type="submit">Sign in</button>
    </form>
  );
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
  const name = (id?: string) => assistants.find((a) => a.id === id)?.name ?? id ?? "";

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

  return (
    <nav class="chats" aria-label="Chats">
      <button type="button" class="primary" onClick={() => onOpen("")}>
        New chat
      </button>
      <ul>
        {chats.map((c) => (
          <li key={c.id} class={c.id === current ? "current" : ""}>
            {editing === c.id ? (
              <form
                class="rename"
                onSubmit={(e) => {
                  e.preventDefault();
                  rename(c.id);
                }}
              >
                <input
                  aria-label="New title"
                  value={title}
                  onInput={(e) => setTitle(e.currentTarget.value)}
                  onKeyDown={(e) => e.key === "Escape" && setEditing("")}
                  autofocus
                />
                <button type="submit">Save</button>
              </form>
            ) : (
              <>
                <button type="button" class="open" aria-current={c.id === current ? "page" : undefined} onClick={() => onOpen(c.id)}>
                  <span class="title">{c.title || c.id}</span>
                  <span class="meta">
                    {name(c.assistant_id)}
                    {c.running && <span class="running" aria-label="running"> ●</span>}
                  </span>
                </button>
                <button
                  type="button"
                  class="icon"
                  aria-label={`Rename ${c.title || c.id}`}
                  onClick={() => {
                    setEditing(c.id);
                    setTitle(c.title ?? "");
                  }}
                >
                  ✎
                </button>
                <button type="button" class="icon" aria-label={`Delete ${c.title || c.id}`} onClick={() => remove(c)}>
                  ✕
                </button>
              </>
            )}
          </li>
        ))}
      </ul>
    </nav>
  );
}
