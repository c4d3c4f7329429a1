// Type declarations for agentbox hooks: the ctx object, the log and console
// globals, and the shapes Create and Next take and return.
//
// Copy this file into an assistant's src/ folder (or point tsconfig.json's
// "files" at it) and editors complete and check hook code:
//
//   function Create(ctx: Context, messages: Message[], options: CreateOptions): CreateResult | null { ... }
//   function Next(ctx: Context, payload: NextPayload, options: CreateOptions): NextResult | null { ... }
//
// Hooks run synchronously in an embedded engine (ES2017 after transpiling):
// there is no event loop, no timers, no fetch and no Node.js modules. A
// returned Promise must already be settled. Every call has a timeout (5 s
// unless the assistant sets hooks.timeout) and starts from a fresh global
// scope: keep state in ctx.memory, not in variables.
//
// Hooks written for Yao run too. Imports of Yao's runtime ("@yao/runtime",
// "@yao/neo", "@yaoapps/client", ...) are dropped, as Yao drops them.
// Yao's Exception, atob and btoa exist; its other globals (Process, Query,
// Store, FS, http, time, ...) do not: agentbox check warns where a hook
// uses one, and using it throws an error with code YAO_ONLY.
//
// The Go side (package jsapi) registers exactly what is declared here; a
// test compares the two.

/** A conversation message. */
interface Message {
  role: "system" | "user" | "assistant" | "tool";
  /** The text; a user message with images is its parts, as Yao gives it. */
  content: string | ContentPart[];
  name?: string;
  tool_call_id?: string;
  /** Function calls of a direct assistant's model, for the client to run. */
  tool_calls?: ToolCallMessage[];
}

/**
 * A part of a message's content (OpenAI's shape): text, or an image as a
 * data: URL (an address a client sent was fetched by the server).
 */
type ContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string; detail?: "auto" | "low" | "high" } };

/** A function call in an assistant message (OpenAI's shape). */
interface ToolCallMessage {
  id: string;
  type: "function";
  function: ToolCallFunction;
}

interface ToolCallFunction {
  name: string;
  /** The arguments as JSON text. */
  arguments: string;
}

/**
 * A message for the client. type is "text", "loading", "notice", ... or any
 * type of your own; props.content (or props.message) is the text clients
 * show. A plain string is short for {type: "text", props: {content}}.
 */
interface ClientMessage {
  type: string;
  props?: Record<string, any>;
  /** Your own id for the message (default: one is generated). Send and SendStream only. */
  id?: string;
  /** Yao's name for id. */
  message_id?: string;
  /** The block the message belongs to (Send's second argument does the same). */
  block_id?: string;
  /** Yao's thread of concurrent output: accepted, unused. */
  thread_id?: string;
}

/** The request a hook runs for. */
interface Context {
  readonly chat_id: string;
  readonly assistant_id: string;
  /** The authenticated user. */
  readonly user_id: string;
  readonly locale: string;
  /** The client's theme (Yao's ?theme=, X-Yao-Theme or metadata.theme). */
  readonly theme: string;
  /** What made the request: "api" from HTTP, "agent_fork" from ctx.agent, "agent" when delegated (Yao's referers). */
  readonly referer: string;
  /** The output the client accepts: "standard", "cui-web", "cui-native" or "cui-desktop". */
  readonly accept: string;
  /** The route the client shows (Yao's ?route=, X-Yao-Route or the request's route). */
  readonly route: string;
  /** The client: its type from the User-Agent (web, agent, jssdk, android, ios, windows, macos, linux), User-Agent and address. */
  readonly client: { type: string; user_agent: string; ip: string };
  /** Who is authenticated: the user, and the team when the credentials name one. */
  readonly authorized: { user_id: string; team_id?: string };
  /** The request's metadata (a copy: changing it changes nothing else). */
  readonly metadata: Record<string, any>;
  readonly memory: Memory;
  /** The chat's sandbox; undefined for assistants without a sandbox block. */
  readonly sandbox?: Sandbox;
  /**
   * Yao's sandbox v2 view of the chat's workspace: the same files as
   * sandbox, with the same confinement. Undefined without a sandbox.
   */
  readonly workspace?: Workspace;
  /** Yao's sandbox v2 view of the sandbox itself. Undefined without a sandbox. */
  readonly computer?: Computer;
  /** Calls other assistants of the app (Yao's ctx.agent). */
  readonly agent: AgentAPI;
  /** Calls the app's connectors directly (Yao's ctx.llm). */
  readonly llm: LlmAPI;
  /** The assistant's MCP servers: tools, resources, prompts (Yao's ctx.mcp). */
  readonly mcp: MCPAPI;

  /** Sends a whole message and returns its id; blockId groups it with others (EndBlock ends the group). */
  Send(message: ClientMessage | string, blockId?: string): string;
  /** Starts a streamed message and returns its id; Append to it, End it. */
  SendStream(message: ClientMessage | string, blockId?: string): string;
  /**
   * Adds to a message: text to a streaming message's text; anything else
   * (or to a message that ended) is added to what is at path (default
   * "props.content"): a string grows, a list gets the value. Returns the id.
   */
  Append(id: string, content: ClientMessage | string, path?: string): string;
  /** Replaces a message's type, text and props. Returns the id. */
  Replace(id: string, message: ClientMessage | string): string;
  /** Merges data (an object, or a message's props) into the object at path (default "props"). Returns the id. */
  Merge(id: string, data: Record<string, any> | ClientMessage, path?: string): string;
  /** Puts data at path ("props.status"). Returns the id. */
  Set(id: string, data: any, path: string): string;
  /**
   * Ends a streamed message, with final text appended first when given
   * (ending twice is harmless). Streams left open end after Next.
   */
  End(id: string, final?: string): string;
  /** Ends a block of messages (the block id given to Send or SendStream). */
  EndBlock(blockId: string): void;
  /** A new message id, unique in the request, for Send's message_id. */
  MessageID(): string;
  /** A new block id, unique in the request. */
  BlockID(): string;
  /** A new thread id, unique in the request (Yao's; agentbox uses it for nothing). */
  ThreadID(): string;
}

/**
 * Other assistants of the app, called from a hook. Each call runs the
 * assistant's whole turn (its hooks, its sandbox if it has one) as this
 * request's user, in a chat of its own beside this one ("{chat}@{id}":
 * its memory.chat and workspace persist across calls from this chat; its
 * turns are not stored). Calls end with the hook's timeout or the
 * request; a call that would come back to an assistant already running in
 * this turn, or go more than 4 calls deep, fails with an error naming the
 * chain. Failures are results with error set, never thrown (but argument
 * errors are).
 */
interface AgentAPI {
  /** Calls one assistant and waits for its answer. */
  Call(agent_id: string, messages: Message[], options?: AgentCallOptions): AgentResult;
  /** Calls all at once and waits for all (at most 16); results in request order. */
  All(requests: AgentRequest[], options?: AgentBatchOptions): AgentResult[];
  /** Returns once one call succeeds; the others are stopped and their results are null. */
  Any(requests: AgentRequest[], options?: AgentBatchOptions): (AgentResult | null)[];
  /** Returns once one call ends, however; the others are stopped and their results are null. */
  Race(requests: AgentRequest[], options?: AgentBatchOptions): (AgentResult | null)[];
}

/** One request of All, Any or Race. */
interface AgentRequest {
  agent: string;
  messages: Message[];
  options?: AgentCallOptions;
}

/** Options of a call (Yao's CallOptions, plus stream). */
interface AgentCallOptions {
  /** A connector of the app for the callee's model. */
  connector?: string;
  /** Metadata the callee's hooks see. */
  metadata?: Record<string, any>;
  /** Yao's agent mode: accepted, agentbox assistants have one. */
  mode?: string;
  /** Yao's skip: accepted; a call's turn is never stored, and is silent unless stream. */
  skip?: Record<string, boolean>;
  /** Streams the callee's messages into this turn's events, marked with its id (event.agent). */
  stream?: boolean;
  /** Receives the callee's events while the hook waits; a non-zero return stops the call. */
  onChunk?: (event: AgentEvent) => number;
}

/** Options of All, Any and Race. */
interface AgentBatchOptions {
  /** Receives every callee's events (unless its request has its own onChunk). */
  onChunk?: (agent_id: string, index: number, event: AgentEvent) => number;
}

/** A callee's event as onChunk gets it. */
interface AgentEvent {
  /** start, delta, end or replace. */
  event: string;
  id: string;
  type: string;
  text?: string;
  props?: Record<string, any>;
  /** Set when the callee's own call streamed it. */
  agent?: { id: string; call: string };
}

/** How a call ended (Yao's caller.Result). */
interface AgentResult {
  agent_id: string;
  /** The answer text. */
  content?: string;
  response?: AgentResponse;
  /** Why the call failed; the other fields are then absent. */
  error?: string;
  /** The error's code (invalid_request for a cycle, timeout, ...). */
  code?: string;
}

/** The callee's turn (Yao's Response). */
interface AgentResponse {
  chat_id: string;
  assistant_id: string;
  completion: AgentCompletion;
  /** What the callee's Next hook returned, when it returned data. */
  next?: { data: any };
}

/** The callee's answer. */
interface AgentCompletion {
  content: string;
  role: string;
  finish_reason: string;
  usage: Record<string, any>;
}

/**
 * The app's connectors, called from a hook (Yao's ctx.llm). Each call
 * goes through the connector's circuit breaker with the connector's key,
 * its answer streams to the client as the hook's messages, and its tokens
 * count in the turn's usage. Calls end with the hook's timeout or the
 * request. Failures (an unknown connector, a bad option, an open breaker,
 * the provider's error) are results with error set, never thrown (but
 * argument errors are).
 */
interface LlmAPI {
  /** Calls one connector and waits for its answer. */
  Stream(connector: string, messages: Message[], options?: LlmOptions): LlmResult;
  /** Calls all at once and waits for all (at most 16); results in request order. */
  All(requests: LlmRequest[], options?: LlmBatchOptions): LlmResult[];
  /** Returns [the first success] once one succeeds (the others are stopped), or every failure. */
  Any(requests: LlmRequest[], options?: LlmBatchOptions): LlmResult[];
  /** Returns [the first result] once one call ends, however; the others are stopped. */
  Race(requests: LlmRequest[], options?: LlmBatchOptions): LlmResult[];
}

/** One request of ctx.llm.All, Any or Race. */
interface LlmRequest {
  connector: string;
  messages: Message[];
  options?: LlmOptions;
}

/**
 * Model options of a ctx.llm call (Yao's: those of package.yao's options,
 * plus model). What the model cannot take is adjusted as for the
 * assistant's own options; an unknown option is an error result.
 */
interface LlmOptions {
  temperature?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  top_p?: number;
  presence_penalty?: number;
  frequency_penalty?: number;
  stop?: string | string[];
  user?: string;
  seed?: number;
  tools?: any[];
  tool_choice?: any;
  response_format?: Record<string, any>;
  reasoning_effort?: string;
  n?: number;
  logit_bias?: Record<string, number>;
  parallel_tool_calls?: boolean;
  audio?: Record<string, any>;
  /** Another model of the connector. */
  model?: string;
  /** Accepted: every call streams. */
  stream?: boolean;
  /** Stream only: receives the answer's pieces while the hook waits; a non-zero return stops the call. */
  onChunk?: (message: LlmChunk) => number;
}

/** Options of ctx.llm.All, Any and Race. */
interface LlmBatchOptions {
  /** Receives every call's pieces. */
  onChunk?: (connector: string, index: number, message: LlmChunk) => number;
}

/** A piece of an answer as onChunk gets it (Yao's message). */
interface LlmChunk {
  /** text, thinking or tool_call. */
  type: string;
  message_id: string;
  /** True for a piece that adds to the message. */
  delta: boolean;
  /** start, delta, end or replace. */
  event: string;
  /** content: the piece's text. */
  props: Record<string, any>;
}

/** How a ctx.llm call ended (Yao's llm.Result). */
interface LlmResult {
  connector: string;
  /** The answer text. */
  content?: string;
  response?: LlmResponse;
  /** Why the call failed; content and response are then absent. */
  error?: string;
  /** The error's code (invalid_request, auth, circuit_open, timeout, ...). */
  code?: string;
}

/** The model's answer (Yao's CompletionResponse). */
interface LlmResponse {
  object: string;
  model: string;
  role: string;
  content: string;
  /** The model's reasoning, when it gave one. */
  reasoning_content?: string;
  tool_calls?: ToolCallMessage[];
  finish_reason: string;
  usage: LlmUsage;
}

/** Tokens of one call. */
interface LlmUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/**
 * The assistant's MCP servers (those of package.yao's mcp.servers, or the
 * ones its Create hook chose), by server id, as Yao's ctx.mcp reaches
 * them: process servers (the app's scripts), http and sse servers, and a
 * direct assistant's stdio servers (a sandboxed one's run inside its
 * sandbox, for its agent). A tool outside the server's tools list is
 * refused. The single calls throw MCP_ERROR on failure (a tool result the
 * server marks as an error too); All, Any and Race give {error} results.
 * Calls end with the hook's timeout.
 */
interface MCPAPI {
  /** {tools: [{name, description, inputSchema}]} */
  ListTools(mcp: string, cursor?: string): { tools: MCPTool[]; nextCursor?: string };
  /** The tool's result: each text part parsed as JSON when it is JSON; one part alone, several as a list. */
  CallTool(mcp: string, name: string, args?: Record<string, any>): any;
  /** Calls the tools one after another; the first failure throws. */
  CallTools(mcp: string, tools: MCPToolCall[]): any[];
  /** Calls the tools at once (at most 16); a failure is {error} in its place. */
  CallToolsParallel(mcp: string, tools: MCPToolCall[]): any[];
  /** Calls tools of several servers at once (at most 16); results in request order. */
  All(requests: MCPRequest[]): MCPResult[];
  /** Returns [the first success] once one succeeds (the others are stopped), or every failure. */
  Any(requests: MCPRequest[]): MCPResult[];
  /** Returns [the first result] once one call ends. */
  Race(requests: MCPRequest[]): MCPResult[];
  /** {resources: [{uri, name, description, mimeType}]} */
  ListResources(mcp: string, cursor?: string): { resources: Record<string, any>[]; nextCursor?: string };
  /** {contents: [{uri, mimeType, text}]} */
  ReadResource(mcp: string, uri: string): { contents: Record<string, any>[] };
  /** {prompts: [{name, description, arguments}]} */
  ListPrompts(mcp: string, cursor?: string): { prompts: Record<string, any>[]; nextCursor?: string };
  /** {description, messages: [{role, content: {type, text}}]} */
  GetPrompt(mcp: string, name: string, args?: Record<string, any>): { description?: string; messages: Record<string, any>[] };
}

/** A tool as ListTools gives it. */
interface MCPTool {
  name: string;
  description?: string;
  inputSchema: Record<string, any>;
}

/** One call of CallTools and CallToolsParallel. */
interface MCPToolCall {
  name: string;
  arguments?: Record<string, any>;
}

/** One request of ctx.mcp.All, Any and Race. */
interface MCPRequest {
  mcp: string;
  tool: string;
  arguments?: Record<string, any>;
}

/** How a call of All, Any or Race ended (Yao's MCPToolResult). */
interface MCPResult {
  mcp: string;
  tool: string;
  result?: any;
  error?: string;
}

/** Key-value memory; values are anything JSON can hold. */
interface Memory {
  /** Shared by all of the user's chats; persists. */
  readonly user: MemoryNamespace;
  /** Shared by the user's team; persists. Throws MEMORY_ERROR when the request names no team. */
  readonly team: MemoryNamespace;
  /** This chat's; persists. */
  readonly chat: MemoryNamespace;
  /** This request's: Create, Next and tools of one request share it. */
  readonly context: MemoryNamespace;
}

/** One memory namespace. Keys are 1 to 256 bytes; values at most 1 MiB as JSON. */
interface MemoryNamespace {
  /** The stored value, or undefined when there is none. */
  Get<T = any>(key: string): T | undefined;
  /** Stores a JSON-serialisable value (undefined and functions throw INVALID_ARGUMENT). */
  Set(key: string, value: any): void;
  /** Removes key; a missing key is fine. */
  Del(key: string): void;
  Has(key: string): boolean;
  /** All keys, sorted. */
  Keys(): string[];
  /** How many keys there are. */
  Len(): number;
  /** Removes every key. */
  Clear(): void;
  /** Adds step (default 1, an integer) to the integer under key (missing: 0), atomically; returns the new value. A value that is not an integer throws MEMORY_ERROR. */
  Incr(key: string, step?: number): number;
  /** Incr with -step. */
  Decr(key: string, step?: number): number;
  /** Removes key and returns its value (undefined when none), atomically: of two callers one gets it. */
  GetDel<T = any>(key: string): T | undefined;
}

/**
 * The chat's workspace as Yao's sandbox v2 hooks see it (ctx.workspace).
 * Paths and confinement are Sandbox's: leaving the workspace, also through
 * a symlink, throws SANDBOX_PATH_OUTSIDE; special files throw
 * SANDBOX_SPECIAL_FILE; calls end with the hook's timeout.
 */
interface Workspace {
  /** A file's content as text (at most 32 MiB, else FILE_TOO_LARGE). */
  ReadFile(path: string): string;
  /** Writes a file atomically, creating missing folders. */
  WriteFile(path: string, content: string | ArrayBuffer): void;
  /** A folder's entries, sorted by name (default: the workspace root). */
  ReadDir(path?: string): WorkspaceEntry[];
  /** Creates a folder and its missing parents. */
  MkdirAll(path: string): void;
  /** Removes a file, a symlink or an empty folder (NOT_FOUND when missing). */
  Remove(path: string): void;
  /** Removes a file or a folder with everything in it (missing is fine). */
  RemoveAll(path: string): void;
  /** Moves an entry, creating the destination's folders. */
  Rename(from: string, to: string): void;
  /** Copies a file, or a folder with everything in it. */
  Copy(src: string, dst: string): void;
  /** Describes an entry (NOT_FOUND when missing). */
  Stat(path: string): WorkspaceStat;
  /** Whether an entry exists; a path outside the workspace throws. */
  Exists(path: string): boolean;
}

/** One entry of Workspace.ReadDir. */
interface WorkspaceEntry {
  name: string;
  is_dir: boolean;
  size: number;
}

/** What Workspace.Stat returns. */
interface WorkspaceStat {
  name: string;
  size: number;
  is_dir: boolean;
  /** Go's fs.FileMode bits (permissions in the low 9). */
  mode: number;
  /** Modification time, in milliseconds since the epoch. */
  mtime: number;
}

/** The sandbox as Yao's sandbox v2 hooks see it (ctx.computer). */
interface Computer {
  /** The sandbox's id on its runtime. */
  readonly id: string;
  /**
   * Runs a command and returns its output and exit code, whatever the code
   * (only a failure to run, or a timeout, throws). A string is split on
   * white space into argv, unless options.shell makes it a script.
   */
  Exec(cmd: string[] | string, options?: ExecOptions): ExecResult;
  /** The sandbox's identity and system, in Yao's ComputerInfo shape. */
  Info(): ComputerInfo;
  /**
   * The URL of the sandbox's desktop (noVNC on its preview, with a fresh
   * ticket); throws NO_DESKTOP in a sandbox without one.
   */
  VNC(): string;
  /**
   * The preview URL of a port the assistant declares (sandbox.ports,
   * computer.ports, services) at path, with a ticket valid for two
   * minutes: the URL the chat's user opens to see what the port serves.
   * Throws INVALID_ARGUMENT for an undeclared port or without a live
   * sandbox, SANDBOX_UNAVAILABLE when the server serves no previews.
   */
  Proxy(port: number, path?: string): string;
  /**
   * agentbox's: a PNG of the sandbox's desktop (sandbox.desktop or
   * computer.vnc), the screen the user watches; throws NO_DESKTOP in a
   * sandbox without one.
   */
  Screenshot(): ArrayBuffer;
}

/** What Computer.Exec returns. */
interface ExecResult {
  stdout: string;
  stderr: string;
  exit_code: number;
  /** Set when the output was cut at its cap. */
  truncated?: boolean;
}

/** What Computer.Info returns. */
interface ComputerInfo {
  /** Always "box": a sandbox of its own. */
  kind: string;
  /** The sandbox runtime (docker, local, kubernetes). */
  node_id: string;
  tai_id: string;
  status: string;
  system: ComputerSystem;
  box_id: string;
  container_id: string;
  image: string;
  /** "oneshot" (one turn) or "session" (kept for the chat). */
  policy: string;
}

/** The sandbox's system, as it reports it. */
interface ComputerSystem {
  os: string;
  /** Go's name for the machine (amd64, arm64). */
  arch: string;
  hostname: string;
  num_cpu: number;
  shell: string;
}

/**
 * The chat's workspace and commands in its sandbox. Paths are relative to
 * workdir or absolute under it; anything that leaves the workspace (also
 * through a symlink) throws SANDBOX_PATH_OUTSIDE. Only regular files and
 * folders are read or written: a FIFO, socket or device the agent left
 * throws SANDBOX_SPECIAL_FILE instead of blocking the hook. File calls end
 * with the hook's timeout.
 */
interface Sandbox {
  /** Where the workspace is inside the sandbox: "/workspace". */
  readonly workdir: string;
  /** A file's content as text (at most 32 MiB, else FILE_TOO_LARGE). */
  ReadFile(path: string): string;
  /**
   * Writes a file atomically, creating missing folders. Whatever was at
   * path (also a FIFO or symlink) is replaced, never written through. A
   * workspace at its disk limit throws SANDBOX_DISK_FULL.
   */
  WriteFile(path: string, content: string | ArrayBuffer): void;
  /** A folder's entries, sorted by name (default: the workspace root). */
  ListDir(path?: string): FileInfo[];
  /**
   * Runs a command to completion and returns its stdout. A non-zero exit
   * throws an ExecError (code EXEC_FAILED); running past options.timeout
   * throws EXEC_TIMEOUT. A string argv is a shell script and needs
   * {shell: true}.
   */
  Exec(argv: string[] | string, options?: ExecOptions): string;
}

interface ExecOptions {
  /** Working directory, relative to workdir (created when missing). */
  cwd?: string;
  env?: Record<string, string>;
  /** Milliseconds (the hook's own timeout bounds it too). */
  timeout?: number;
  stdin?: string;
  /** Run argv (one script) with /bin/sh -c. */
  shell?: boolean;
}

/** A ListDir entry. */
interface FileInfo {
  name: string;
  size: number;
  is_dir: boolean;
  /** RFC 3339, UTC. */
  mod_time: string;
}

/** Codes of the errors ctx functions throw. */
type ErrorCode =
  | "SANDBOX_PATH_OUTSIDE"
  | "NOT_FOUND"
  | "EXEC_TIMEOUT"
  | "EXEC_FAILED"
  | "INVALID_ARGUMENT"
  | "MEMORY_ERROR"
  | "SANDBOX_UNAVAILABLE"
  | "SANDBOX_REMOVED"
  | "FILE_TOO_LARGE"
  | "SANDBOX_SPECIAL_FILE"
  | "SANDBOX_DISK_FULL"
  | "IO_ERROR"
  | "NO_DESKTOP"
  | "MCP_ERROR"
  | "HOOK_TIMEOUT"
  | "CANCELED"
  | "YAO_ONLY";

/** What ctx functions throw: an Error with a stable code to branch on. */
interface AgentboxError extends Error {
  code: ErrorCode;
}

/** What Exec throws when the command exits with a non-zero code. */
interface ExecError extends AgentboxError {
  code: "EXEC_FAILED";
  exit_code: number;
  stdout: string;
  stderr: string;
}

/** The sandbox arguments a Create hook may override. */
interface SandboxArguments {
  max_turns?: number;
  permission_mode?: string;
  allowed_tools?: string[];
  disallowed_tools?: string[];
  model?: string;
}

/**
 * The turn's options: model options, the connector and, for a sandboxed
 * assistant, the sandbox arguments. Create gets them all and returns the
 * ones it changes; an unknown field or a value of the wrong type fails the
 * request with a message naming it.
 */
interface CreateOptions {
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  n?: number;
  /** One stop sequence or several. */
  stop?: string | string[];
  presence_penalty?: number;
  frequency_penalty?: number;
  logit_bias?: { [token: string]: number };
  user?: string;
  seed?: number;
  response_format?: object;
  tools?: object[];
  tool_choice?: string | object;
  /** false: at most one tool call at a time. */
  parallel_tool_calls?: boolean;
  /** Refused: agentbox always streams. */
  stream?: boolean;
  reasoning_effort?: string;
  /** The model of a direct assistant (default: the connector's). */
  model?: string;
  /** OpenAI's audio output: {voice, format}. */
  audio?: object;
  /** The connector id. */
  connector?: string;
  /** Only the sandbox arguments may be changed. */
  sandbox?: SandboxOptions;
  /** Use one of the assistant's prompt presets ("chat.friendly" for prompts/chat/friendly.yml). */
  prompt_preset?: string;
  /** Leave agent/prompts.yml's global prompts out of this turn (or put them back). */
  disable_global_prompts?: boolean;
  /** The MCP servers of this turn, in place of package.yao's mcp.servers. */
  mcp_servers?: MCPServerOption[];
  /** What the prompts see as $CTX.LOCALE, $CTX.THEME and $CTX.ROUTE. */
  locale?: string;
  theme?: string;
  route?: string;
  /** Merged over the request's metadata ($CTX.<key> in prompts). */
  metadata?: Record<string, any>;
}

/** An MCP server a turn uses, with an optional tool filter. */
interface MCPServerOption {
  server_id: string;
  tools?: string[];
  /** Yao's resource filter: accepted, not enforced. */
  resources?: string[];
}

/** The part of the sandbox block a Create hook may change. */
interface SandboxOptions {
  arguments?: SandboxArguments;
}

/**
 * What Create may return instead of null. Create sees the conversation
 * without the assistant's prompts (they are added after it, so a hook can
 * pick a preset). Options go in options, or at the top level as Yao's
 * hooks return them (options wins when both set one).
 */
interface CreateResult {
  /** Replaces the conversation; content may be parts (text and image_url, as Yao's). */
  messages?: Message[] | null;
  /** Overrides options (model options, connector, sandbox.arguments, ...). */
  options?: CreateOptions | null;
  temperature?: number;
  top_p?: number;
  max_tokens?: number;
  max_completion_tokens?: number;
  n?: number;
  stop?: string | string[];
  presence_penalty?: number;
  frequency_penalty?: number;
  logit_bias?: { [token: string]: number };
  user?: string;
  seed?: number;
  response_format?: object;
  tools?: object[];
  tool_choice?: string | object;
  parallel_tool_calls?: boolean;
  stream?: boolean;
  reasoning_effort?: string;
  model?: string;
  audio?: object;
  connector?: string;
  prompt_preset?: string;
  disable_global_prompts?: boolean;
  mcp_servers?: MCPServerOption[];
  locale?: string;
  theme?: string;
  route?: string;
  metadata?: Record<string, any>;
  /** Yao-only: accepted and ignored (logged). */
  uses?: object;
  force_uses?: boolean;
  search?: any;
  /**
   * Hands the turn to another assistant of the app before the model runs:
   * its answer streams as this turn's and is stored in this chat; this
   * assistant's model and Next hook do not run.
   */
  delegate?: Delegate;
}

/** A Create or Next hook's hand-over to another assistant (Yao's DelegateConfig). */
interface Delegate {
  agent_id: string;
  /** What the other assistant gets (default: the conversation). */
  messages?: Message[];
  options?: AgentCallOptions;
}

/** A tool the agent called during the turn, under agentbox's names and Yao's. */
interface ToolCall {
  id: string;
  name: string;
  input: any;
  result: string;
  is_error: boolean;
  /** Yao's names: toolcall_id = id, arguments = input, error = result when is_error. */
  toolcall_id: string;
  /** The MCP server of an mcp__server__tool call ("" otherwise). */
  server: string;
  tool: string;
  arguments: any;
  error: string;
}

/**
 * The answer, as Yao's completion object that is also the answer's text:
 * a String object, so `${completion}`, completion.trim(), == and
 * JSON.stringify give the text, with Yao's fields on it.
 */
interface Completion extends String {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  role: "assistant";
  content: string;
  refusal: null;
  reasoning_content?: string;
  /** stop, length, tool_calls, content_filter. */
  finish_reason: string;
  tool_calls: CompletionToolCall[];
  usage: CompletionUsage;
}

/** A tool call the model asked for (direct assistants). */
interface CompletionToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

interface CompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** What Next is told about the finished turn. */
interface NextPayload {
  messages: Message[];
  /** The answer: its text, and Yao's completion fields. */
  completion: Completion;
  tools: ToolCall[];
  /** The turn's error message, null when it succeeded. */
  error: string | null;
}

/** What Next may return instead of null: data replaces the response, metadata is logged. */
interface NextResult {
  data?: any;
  metadata?: Record<string, any>;
  /** Hands the turn to another assistant: its answer replaces this one's (also a failed one). */
  delegate?: Delegate;
}

type CreateHook = (ctx: Context, messages: Message[], options: CreateOptions) => CreateResult | null | undefined | void;
type NextHook = (ctx: Context, payload: NextPayload, options: CreateOptions) => NextResult | null | undefined | void;

/** Structured log lines with the request's ids; arguments are joined by spaces, objects as JSON. */
interface Log {
  /** Below debug. */
  Trace(...args: any[]): void;
  Debug(...args: any[]): void;
  Info(...args: any[]): void;
  Warn(...args: any[]): void;
  Error(...args: any[]): void;
  /** At error level; the server goes on. */
  Fatal(...args: any[]): void;
  /** At error level, then throws an Error with the line. */
  Panic(...args: any[]): void;
}

/** console.* goes to the same log (log and info at info level). */
interface Console {
  log(...args: any[]): void;
  info(...args: any[]): void;
  debug(...args: any[]): void;
  warn(...args: any[]): void;
  error(...args: any[]): void;
}

declare var log: Log;
declare var console: Console;

/** Yao's Exception: an Error whose code is the given code. */
declare class Exception extends Error {
  constructor(message: string, code?: number | string);
  code: string;
}
declare function atob(data: string): string;
declare function btoa(data: string): string;

/**
 * Runs a process of the app, as Yao's Process does: scripts.<path under
 * scripts/>.<Function>, services.<path under services/>.<Function> or
 * agents.<assistant id>.<path under its src/>.<Function>, called with args
 * in a runtime of its own, within this call's deadline. Yao's other
 * process families (models, flows, tables, ...) throw YAO_ONLY; an unknown
 * script throws NOT_FOUND.
 */
declare function Process(name: string, ...args: any[]): any;

/** Yao's time: Sleep waits (within the call's deadline); After is Yao-only. */
interface YaoTime {
  Sleep(ms: number): null;
  /** Yao-only: throws YAO_ONLY. */
  After(ms: number, process: string, ...args: any[]): null;
}
declare const time: YaoTime;

/** Yao's $L: the text without a leading "::" (agentbox loads no langs/ dictionaries). */
declare function $L<T>(text: T): T;
/** The request's authorized user, null when there is none. */
declare function Authorized(): { user_id: string } | null;
/** Calls the function whose source is given ("function f(a) {...}" or an arrow function) with args. */
declare function Eval(source: string, ...args: any[]): any;
/** Calls callback with a new Constructor(...args), then its __release method if it has one. */
declare function Use(Constructor: new (...args: any[]) => any, ...rest: any[]): any;

/** A process All, Any and Race run; timeout in seconds. */
interface Task {
  process: string;
  args?: any[];
  timeout?: number;
}
/** One task's outcome, in the order the tasks were given. */
interface TaskResult {
  data: any;
  index: number;
  error?: string;
}
/** Runs the tasks at once (at most 8 at a time) and waits for all. */
declare function All(tasks: Task[]): TaskResult[];
/** Runs the tasks at once until one succeeds with a value; the others are stopped. */
declare function Any(tasks: Task[]): TaskResult[];
/** Runs the tasks at once until one ends; the others are stopped. */
declare function Race(tasks: Task[]): TaskResult[];
