// The agentbox HTTP API as the web app uses it: JSON calls with the bearer
// token kept in the browser, the native event stream (server-sent events
// over fetch, so the token goes in a header and Last-Event-ID can be set),
// files, and the terminal's WebSocket.

const TOKEN_KEY = "agentbox.token";

export function getToken(): string {
  return localStorage.getItem(TOKEN_KEY) ?? "";
}

export function setToken(token: string) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** An error answer of the API: its status, code and message. */
export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

function headers(extra?: Record<string, string>): Headers {
  const h = new Headers(extra);
  const t = getToken();
  if (t) h.set("Authorization", "Bearer " + t);
  return h;
}

async function check(resp: Response): Promise<Response> {
  if (resp.ok) return resp;
  let code = "http_" + resp.status;
  let message = resp.statusText || "request failed";
  try {
    const body = await resp.json();
    if (body?.error) {
      code = body.error.code ?? code;
      message = body.error.message ?? message;
    }
  } catch {
    // not JSON
  }
  throw new ApiError(resp.status, code, message);
}

/** call sends a JSON request and returns the decoded answer. */
export async function call<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const init: RequestInit = { method, headers: headers(), signal };
  if (method !== "GET") {
    // Every call that changes something is JSON (the server takes no
    // other bodies), a POST without arguments an empty object.
    (init.headers as Headers).set("Content-Type", "application/json");
    if (body !== undefined || method === "POST") init.body = JSON.stringify(body ?? {});
  }
  const resp = await check(await fetch(path, init));
  return (await resp.json()) as T;
}

/** What a chat UI shows of an assistant before the first message
 * (package.yao's placeholder). */
export interface Placeholder {
  title?: string;
  description?: string;
  prompts?: string[];
}

/** One of an assistant's own skills (its folder's skills/). */
export interface AssistantSkill {
  name: string;
  description: string;
}

/** DefinitionError is what is wrong with an assistant's files. */
export interface DefinitionError {
  message: string;
  problems: { file: string; line?: number; col?: number; message: string }[];
  /** serving_last_good: the version loaded before the errors answers. */
  serving_last_good?: boolean;
}

export interface Assistant {
  id: string;
  name: string;
  description?: string;
  sandboxed: boolean;
  /** available is false when the assistant does not run (see error). */
  available: boolean;
  error?: DefinitionError;
  command?: string;
  /** desktop is set when the assistant's sandbox has a live desktop. */
  desktop?: boolean;
  /** previews are the other ports its sandbox may serve to the user. */
  previews?: { port: number; label?: string }[];
  skills: AssistantSkill[];
  avatar?: string;
  tags?: string[];
  sort?: number;
  type?: string;
  placeholder?: Placeholder;
}

export interface ChatInfo {
  id: string;
  assistant_id?: string;
  title?: string;
  messages: number;
  created: string;
  updated: string;
  running: boolean;
}

export interface Message {
  role: string;
  /** The text (of a message with images: its text parts, joined). */
  content: string;
  /** parts is the content of a message with images, in order. */
  parts?: ContentPart[];
  /** error says why an answer is missing or cut short: its turn failed
   * or was stopped. */
  error?: { code: string; message: string };
  /** said, on an answer, are the messages its user sent into the turn
   * while it ran, each with where the answer stood (a byte offset into
   * content). */
  said?: { content: string; at: number }[];
}

export interface TurnState {
  id: string;
  assistant_id: string;
  prompt?: string;
  running: boolean;
  last_event_id: string;
}

export interface ChatDetail extends ChatInfo {
  history: Message[];
  workspace: boolean;
  turn?: TurnState;
}

export interface FileInfo {
  name: string;
  size: number;
  is_dir: boolean;
  mod_time: string;
}

/** newChatID names a chat the page starts. */
export function newChatID(): string {
  const r = Array.from(crypto.getRandomValues(new Uint8Array(5)), (b) => b.toString(16).padStart(2, "0")).join("");
  return "web-" + Date.now().toString(36) + "-" + r;
}

export const chatPath = (chat: string) => "/api/chats/" + encodeURIComponent(chat);

/** assistants lists the assistants in the order package.yao's sort
 * asks for (then by name). */
export async function assistants(): Promise<Assistant[]> {
  const list = (await call<{ data: Assistant[] }>("GET", "/api/assistants")).data;
  return list.sort((a, b) => (a.sort ?? 0) - (b.sort ?? 0) || a.name.localeCompare(b.name));
}

export async function chats(): Promise<ChatInfo[]> {
  return (await call<{ data: ChatInfo[] }>("GET", "/api/chats")).data;
}

export const getChat = (chat: string) => call<ChatDetail>("GET", chatPath(chat));
export const renameChat = (chat: string, title: string) => call<ChatInfo>("PATCH", chatPath(chat), { title });
export const deleteChat = (chat: string) => call<unknown>("DELETE", chatPath(chat));
export const cancelTurn = (chat: string) => call<{ canceled: number }>("POST", chatPath(chat) + "/cancel");
/** sayToTurn sends a message into the chat's running turn: the agent
 * reads it before its next step (409 when no running turn can take it). */
export const sayToTurn = (chat: string, content: string) => call<{ sent: boolean }>("POST", chatPath(chat) + "/messages", { content });
/** interruptTurn stops the running turn's current step; the chat and its
 * agent go on (cancelTurn stops them). */
export const interruptTurn = (chat: string) => call<{ interrupted: boolean }>("POST", chatPath(chat) + "/interrupt");
/** rewindChat brings the chat back to its state after turn (files, session, memory, history). */
export const rewindChat = (chat: string, turn: number) => call<{ turn: number; messages: number }>("POST", chatPath(chat) + "/rewind", { turn });
/** forkChat starts a new chat from the state after turn of chat. */
export const forkChat = (chat: string, turn: number) => call<{ chat_id: string }>("POST", chatPath(chat) + "/fork", { turn });

/** TurnVersions are the versions of one turn of a chat's current branch
 * (an edited message sent again, a turn after a rewind), oldest first. */
export interface TurnVersions {
  turn: number;
  /** current is the index of the version the chat is on. */
  current: number;
  versions: { checkpoint: string; tip: string; tip_turn: number; time: string; failed?: boolean }[];
}
/** branches lists the versions of each turn of the chat's current branch. */
export async function branches(chat: string): Promise<TurnVersions[]> {
  return (await call<{ data: TurnVersions[] }>("GET", chatPath(chat) + "/branches")).data;
}
/** switchBranch makes version (from 1) of turn the chat's current one. */
export const switchBranch = (chat: string, turn: number, version: number) => call<{ turn: number }>("POST", chatPath(chat) + "/switch", { turn, version });

/** PortInfo is a port the chat's live sandbox declares, with its preview
 * URL (a short-lived ticket in it: ask again for a fresh one). */
export interface PortInfo {
  port: number;
  label?: string;
  state: "listening" | "waiting";
  url: string;
  expires_at: string;
}

/** chatPorts lists the ports of the chat's live sandbox (none without one). */
export async function chatPorts(chat: string): Promise<PortInfo[]> {
  return (await call<{ data: PortInfo[] }>("GET", chatPath(chat) + "/ports")).data;
}

export async function listDir(chat: string, path: string): Promise<FileInfo[]> {
  const q = new URLSearchParams({ path });
  return (await call<{ entries: FileInfo[] }>("GET", chatPath(chat) + "/files?" + q)).entries;
}

/** fileURL is the files API's address of a workspace path. */
export function fileURL(chat: string, path: string, zip = false): string {
  const q = new URLSearchParams({ path });
  if (zip) q.set("format", "zip");
  return chatPath(chat) + "/files?" + q;
}

/** fetchFile reads a workspace file (its first maxBytes when given). */
export async function fetchFile(chat: string, path: string, maxBytes?: number): Promise<{ blob: Blob; type: string; total: number }> {
  const extra: Record<string, string> = {};
  if (maxBytes) extra["Range"] = "bytes=0-" + (maxBytes - 1);
  const resp = await check(await fetch(fileURL(chat, path), { headers: headers(extra) }));
  const blob = await resp.blob();
  let total = blob.size;
  const range = resp.headers.get("Content-Range");
  if (range) total = Number(range.split("/")[1]) || total;
  return { blob, type: resp.headers.get("Content-Type") ?? "application/octet-stream", total };
}

/** download saves a workspace file or folder (zip) through the browser. */
export async function download(chat: string, path: string, zip: boolean, name: string) {
  const resp = await check(await fetch(fileURL(chat, path, zip), { headers: headers() }));
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export async function upload(chat: string, path: string, file: Blob): Promise<{ path: string; size: number }> {
  const q = new URLSearchParams({ path });
  const resp = await check(await fetch(chatPath(chat) + "/files?" + q, { method: "PUT", headers: headers(), body: file }));
  return resp.json();
}

/** One chat event, as the native stream sends it. */
export interface ChatEvent {
  event: "start" | "delta" | "end" | "replace" | "merge" | "set" | "append" | "block_end" | "done";
  id?: string;
  type?: string;
  text?: string;
  props?: Record<string, any>;
  /** Where merge, set and append change the message ("props.items"), and what they put there. */
  path?: string;
  value?: any;
  /** The block a started message belongs to. */
  block?: string;
  /** Set on the events of another assistant a hook called (streamed into this turn). */
  agent?: { id: string; call: string };
  done?: Final;
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens?: number;
  cache_creation_tokens?: number;
  cost_usd?: number;
  turns?: number;
  duration_ms?: number;
}

/** Where a turn's time went (the done event's timings, milliseconds). */
export interface Timings {
  sandbox?: string;
  chat_wait_ms?: number;
  sandbox_wait_ms?: number;
  sandbox_create_ms?: number;
  cli_start_ms?: number;
  first_text_ms?: number;
  tools_ms?: number;
  tools?: number;
  total_ms: number;
}

export interface Final {
  usage: Usage;
  session_id?: string;
  error?: string;
  content?: string;
  timings?: Timings;
}

export type OnEvent = (ev: ChatEvent, id: string) => void;

/** readSSE reads a server-sent event stream until it ends. */
async function readSSE(resp: Response, onEvent: OnEvent): Promise<void> {
  const reader = resp.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let end: number;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let id = "";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) onEvent(JSON.parse(data) as ChatEvent, id);
    }
  }
}

/** A part of a user message in OpenAI's shape: text, or an image as a
 * data: URL. */
export type ContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string } };

/** userMessage is what startTurn sends: the text alone, or a message
 * whose content parts carry the text and the images. */
export function userMessage(text: string, images: string[]): string | { role: "user"; content: ContentPart[] } {
  if (images.length === 0) return text;
  const content: ContentPart[] = [];
  if (text) content.push({ type: "text", text });
  for (const url of images) content.push({ type: "image_url", image_url: { url } });
  return { role: "user", content };
}

/** startTurn sends a message to a chat as a detached turn (it keeps
 * running when the page goes away) and streams its events. With edit, the
 * message replaces the user message of that turn (from 1): the chat goes
 * back to the state before it, the old turns stay on another branch. */
export async function startTurn(
  assistant: string,
  chat: string,
  message: ReturnType<typeof userMessage>,
  onEvent: OnEvent,
  signal: AbortSignal,
  edit = 0,
): Promise<void> {
  const h = headers({ "Content-Type": "application/json" });
  const resp = await check(
    await fetch("/api/assistants/" + encodeURIComponent(assistant) + "/chat", {
      method: "POST",
      headers: h,
      body: JSON.stringify(edit > 0 ? { chat_id: chat, message, detach: true, edit } : { chat_id: chat, message, detach: true }),
      signal,
    }),
  );
  await readSSE(resp, onEvent);
}

/** followTurn streams the events of a chat's turn after lastEventId (from
 * its start when empty). */
export async function followTurn(chat: string, lastEventId: string, onEvent: OnEvent, signal: AbortSignal): Promise<void> {
  const h = headers();
  if (lastEventId) h.set("Last-Event-ID", lastEventId);
  const resp = await check(await fetch(chatPath(chat) + "/events", { headers: h, signal }));
  await readSSE(resp, onEvent);
}

/** terminalSocket opens the WebSocket of a chat's terminal; the token
 * travels as a subprotocol, since a browser sets no headers on it. */
export function terminalSocket(chat: string, rows: number, cols: number): WebSocket {
  const u = new URL(chatPath(chat) + "/terminal", location.href);
  u.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  u.search = new URLSearchParams({ rows: String(rows), cols: String(cols) }).toString();
  const protocols = ["agentbox.terminal.v1"];
  const t = getToken();
  if (t) {
    const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(t)))
      .replace(/\+/g, "-")
      .replace(/\//g, "_")
      .replace(/=+$/, "");
    protocols.push("agentbox.bearer." + b64);
  }
  const ws = new WebSocket(u, protocols);
  ws.binaryType = "arraybuffer";
  return ws;
}

/** A file of a proposed skill, beside its SKILL.md. */
export interface SkillFile {
  path: string;
  content: string;
}

/** The last test turn of a skill proposal. */
export interface SkillTest {
  status: "running" | "completed" | "failed";
  prompt: string;
  chat_id: string;
  started_at: string;
  finished_at?: string;
  answer?: string;
  tool_calls?: { name: string; is_error?: boolean }[];
  usage: Usage;
  session_skills?: string[];
  skill_loaded: boolean;
  skill_used: boolean;
  notices?: string[];
  error?: { code: string; message: string };
}

/** A skill an agent proposed for the user, and what became of it. */
export interface SkillProposal {
  id: string;
  assistant_id: string;
  chat_id: string;
  name: string;
  description: string;
  instructions?: string;
  files?: SkillFile[];
  skill_md?: string;
  test_prompt?: string;
  status: "pending" | "approved" | "rejected" | "retired";
  reason?: string;
  created_at: string;
  decided_at?: string;
  test?: SkillTest;
}

/** One of the user's approved skills. */
export interface UserSkill {
  assistant_id: string;
  name: string;
  description: string;
  proposal_id: string;
  approved_at: string;
  shadowed?: boolean;
}

const proposalPath = (id: string) => "/api/skills/proposals/" + encodeURIComponent(id);

export async function proposals(status = ""): Promise<SkillProposal[]> {
  const q = status ? "?" + new URLSearchParams({ status }) : "";
  return (await call<{ data: SkillProposal[] }>("GET", "/api/skills/proposals" + q)).data;
}

export const proposal = (id: string) => call<SkillProposal>("GET", proposalPath(id));
export const approveProposal = (id: string) => call<SkillProposal>("POST", proposalPath(id) + "/approve", {});
export const rejectProposal = (id: string, reason: string) => call<SkillProposal>("POST", proposalPath(id) + "/reject", { reason });
export const testProposal = (id: string, prompt: string) => call<SkillProposal>("POST", proposalPath(id) + "/test", prompt ? { prompt } : {});

export async function userSkills(): Promise<UserSkill[]> {
  return (await call<{ data: UserSkill[] }>("GET", "/api/skills")).data;
}

export const removeSkill = (assistant: string, name: string) =>
  call<unknown>("DELETE", "/api/assistants/" + encodeURIComponent(assistant) + "/skills/" + encodeURIComponent(name));

/** A case (or script test function) of an assistant's test suite. */
export interface TestCaseInfo {
  id: string;
  input?: string;
  dynamic?: boolean;
  skip?: boolean;
  assertions?: string[];
  checkpoints?: string[];
  timeout?: string;
}

/** A suite: a JSONL file of cases, or a script test file. */
export interface TestSuiteInfo {
  name: string;
  kind: "agent" | "script";
  file?: string;
  cases: TestCaseInfo[];
}

/** An assistant's tests, and what is wrong with the files that do not
 * load. */
export interface TestListing {
  assistant: string;
  suites: TestSuiteInfo[];
  problems?: string[];
}

/** What a test run runs (the flags of agentbox test). */
export interface TestRunRequest {
  suites?: string[];
  run?: string;
  runs?: number;
  parallel?: number;
  connector?: string;
  timeout?: string;
}

/** A test's outcome (Yao's result). */
export interface TestResult {
  id: string;
  status: "passed" | "failed" | "error" | "timeout" | "skipped";
  duration_ms: number;
  error?: string;
  output?: unknown;
  run?: number;
  chat_id?: string;
}

/** One event of a test run. */
export interface TestEvent {
  type: "start" | "case_start" | "turn" | "result" | "stability" | "summary" | "log" | "done";
  suite?: string;
  kind?: "agent" | "script";
  id?: string;
  run?: number;
  input?: string;
  result?: TestResult;
  stability?: { id: string; runs: number; passed: number; failed: number; pass_rate: number; stable: boolean };
  message?: string;
  done: number;
  total: number;
  passed: number;
  failed: number;
}

/** A test run, with its reports once it is done. */
export interface TestRun {
  id: string;
  assistant_id: string;
  state: "running" | "done" | "canceled";
  request: TestRunRequest;
  started_at: string;
  finished_at?: string;
  done: number;
  total: number;
  passed: number;
  failed: number;
  summary?: { total: number; passed: number; failed: number; skipped: number; errors: number; timeouts: number; duration_ms: number };
  failing: boolean;
  error?: string;
  events_url: string;
}

const testRunPath = (id: string) => "/api/tests/runs/" + encodeURIComponent(id);

export const listTests = (assistant: string) => call<TestListing>("GET", "/api/assistants/" + encodeURIComponent(assistant) + "/tests");
export const startTests = (assistant: string, req: TestRunRequest) => call<TestRun>("POST", "/api/assistants/" + encodeURIComponent(assistant) + "/tests/runs", req);
export const testRun = (id: string) => call<TestRun>("GET", testRunPath(id));
export const cancelTests = (id: string) => call<TestRun>("POST", testRunPath(id) + "/cancel");

export async function testRuns(): Promise<TestRun[]> {
  return (await call<{ data: TestRun[] }>("GET", "/api/tests/runs")).data;
}

/** followTests streams a test run's events until it ends. */
export async function followTests(id: string, onEvent: (ev: TestEvent) => void, signal: AbortSignal): Promise<void> {
  const resp = await check(await fetch(testRunPath(id) + "/events", { headers: headers(), signal }));
  await readSSE(resp, (ev) => onEvent(ev as unknown as TestEvent));
}

/** testReport fetches a finished run's report: html, json, jsonl, md or
 * junit. */
export async function testReport(id: string, format: string): Promise<Blob> {
  const resp = await check(await fetch(testRunPath(id) + "/report?" + new URLSearchParams({ format }), { headers: headers() }));
  return resp.blob();
}
