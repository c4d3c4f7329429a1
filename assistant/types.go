// Package assistant loads an app folder: the app settings, connectors,
// assistants with their prompts, MCP server definitions, skills and hook
// source. It reads Yao's formats (YAO-FORMATS.md) with Yao's meaning:
// every field of Yao's assistant, connector, MCP and sandbox files is
// accepted and type-checked. Loading is strict for what neither product
// knows: unknown fields, wrong types and out-of-range values are errors
// that name the file, line and column, with a "did you mean" hint. What
// Yao accepts but agentbox does not honour (Yao-only features, ignored
// fields, non-model connectors) loads with a warning that says so.
package assistant

import (
	"time"

	"github.com/agentbox/agentbox/approval"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/connector"
	"github.com/agentbox/agentbox/skills"
)

// App is a loaded app folder. An App is immutable once loaded and safe for
// concurrent use; a reload produces a new App.
type App struct {
	// Root is the app folder's absolute path.
	Root string
	// Config is app.jsonc (defaults when absent).
	Config *AppConfig
	// Connectors by id ("deepseek.v3" for connectors/deepseek/v3.conn.yao).
	Connectors map[string]*Connector
	// Assistants by id: the folder path under assistants/ with '/' turned
	// into '.' ("tests.mcpload" for assistants/tests/mcpload/).
	Assistants map[string]*Assistant
	// MCPServers are the app's MCP server definitions (mcps/**), by Yao's
	// id ("foo.bar" for mcps/foo/bar.mcp.yao).
	MCPServers map[string]*MCPServer
	// Agent is agent/agent.yml and agent/prompts.yml (zero when absent).
	Agent *AgentSettings
	// Skipped are the connectors that were read but not loaded because
	// their type is not a chat model (databases, caches, embeddings), by
	// id: their type.
	Skipped map[string]string
	// Warnings are what loaded but is not honoured as written (Yao-only
	// features, ignored fields), sorted by file and position.
	Warnings []Problem
	// Failed are the assistants that did not load, by id, each with its
	// errors; the app serves the others (Open). A reload may keep one's
	// last good version serving (Failed.LastGood), which Assistants then
	// holds too.
	Failed map[string]*Failed
	// Errors are the errors Open let through, sorted: those of the failed
	// assistants and of connector and MCP files (which keep from running
	// only the assistants that use them).
	Errors []Problem
}

// AgentSettings is the app's agent/ folder: agent/agent.yml's connector
// roles (what "use::<role>" and an empty connector resolve to) and
// agent/prompts.yml, the global prompts put before every assistant's own
// unless it sets disable_global_prompts.
type AgentSettings struct {
	// Roles maps a role (default, light, vision, audio, heavy) to a
	// connector id, $ENV references resolved at load.
	Roles map[string]string
	// DefaultAssistant is uses.default: the assistant Yao opens by default.
	DefaultAssistant string
	// Runner is the default runner of Yao v2 sandboxes that name none.
	Runner string
	// GlobalPrompts are agent/prompts.yml.
	GlobalPrompts []chat.Message
}

// AppConfig is app.jsonc.
type AppConfig struct {
	// DataRoot holds workspaces and the store (default: ROOT/data).
	DataRoot string `json:"data_root,omitempty"`
	// Listen is the HTTP listen address (default 127.0.0.1:8080).
	Listen string `json:"listen,omitempty"`
	// AllowedHosts are the host names requests may name in Host, beside
	// IP addresses, localhost and Listen's host ("*.example.com" for the
	// names under example.com): the server refuses others when it has no
	// tokens, or when this lists any (CheckAllowedHost).
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
	// AllowedOrigins are the web origins beside the server's own whose
	// pages may send state-changing requests and open terminals, with
	// CORS ("https://app.example.com"; CheckAllowedOrigin).
	AllowedOrigins []string `json:"allowed_origins,omitempty"`
	// PreviewDomain is the parent of the preview hosts of sandbox ports,
	// "<token>.<PreviewDomain>[:port]" (default preview.localhost, which
	// browsers resolve to loopback): a wildcard name pointed at this
	// server, never the API's own host (package preview).
	PreviewDomain string `json:"preview_domain,omitempty"`
	// Auth maps bearer tokens to user ids. Token values may be $ENV.NAME.
	Auth AuthConfig `json:"auth,omitempty"`
	// Sandbox holds defaults for sandboxed assistants.
	Sandbox SandboxDefaults `json:"sandbox,omitempty"`
	// Cleanup configures workspace retention.
	Cleanup CleanupConfig `json:"cleanup,omitempty"`
	// Limits protect the server from heavy users and hostile agents.
	Limits Limits `json:"-"`
	// DrainTimeout is how long a shutdown lets running turns finish before
	// it cancels them (default DefaultDrainTimeout; "drain_timeout").
	DrainTimeout time.Duration `json:"-"`
	// Store is the database of chats, memory and usage (default: SQLite
	// at DATA_ROOT/agentbox.db); ResolveStore gives its store.Config.
	Store StoreConfig `json:"store,omitempty"`
	// Approval is the tool approval policy of the assistants that set
	// none of their own ("approval"; nil: none).
	Approval *approval.Policy `json:"-"`
	// Images says where the images of messages may come from.
	Images ImagesConfig `json:"images,omitempty"`
}

// ImagesConfig is app.jsonc's images block.
type ImagesConfig struct {
	// AllowedHosts are the hosts an image part's http(s) address may name
	// ("cdn.example.com", "*.example.com", an IP address): the server
	// fetches it. Without them only data: URLs are taken.
	AllowedHosts []string `json:"allowed_hosts,omitempty"`
}

// AuthConfig maps bearer tokens to users.
type AuthConfig struct {
	// Tokens: [{"token": "$ENV.AGENTBOX_TOKEN", "user": "alice", "team": "acme"}].
	Tokens []TokenConfig `json:"tokens,omitempty"`
	// MetricsToken is the operator's bearer token for GET /metrics
	// (may be $ENV.NAME). Without it /metrics is served only in
	// development mode.
	MetricsToken string `json:"metrics_token,omitempty"`
}

// TokenConfig is one bearer token. Token may be "$ENV.NAME", resolved when
// the server starts.
type TokenConfig struct {
	Token string `json:"token"`
	User  string `json:"user"`
	// Team is the team the token's holder acts for (optional): it owns
	// the hooks' ctx.memory.team of the token's requests.
	Team string `json:"team,omitempty"`
}

// SandboxDefaults apply to every sandboxed assistant that does not set its
// own value.
type SandboxDefaults struct {
	Runtime string `json:"runtime,omitempty"` // docker | kubernetes | local
	// Isolation is the default boundary between a sandbox and the host's
	// kernel: runc (the default when empty), gvisor or kata (see
	// sandbox.IsolationRunc).
	Isolation string `json:"isolation,omitempty"`
	Network   string `json:"network,omitempty"` // none | host (none with Egress)
	// Egress is the default allow-list policy, when app.jsonc's
	// sandbox.network is an object.
	Egress *Egress `json:"-"`
	// MaxDisk is the default workspace disk limit, as written ("10g");
	// DiskBytes is it parsed (DefaultDisk when unset).
	MaxDisk   string `json:"max_disk,omitempty"`
	DiskBytes int64  `json:"-"`
	// Images per command: {"claude": "agentbox/sandbox-claude:latest"}.
	Images map[string]string `json:"images,omitempty"`
	// Kubernetes configures the kubernetes runtime.
	Kubernetes KubernetesConfig `json:"kubernetes,omitempty"`
}

// KubernetesConfig is app.jsonc's sandbox.kubernetes: where the kubernetes
// runtime creates sandbox pods and how. Zero values are the runtime's
// defaults.
type KubernetesConfig struct {
	// Kubeconfig is the kubeconfig file, relative to the app folder ("":
	// $KUBECONFIG, else the in-cluster service account, else
	// ~/.kube/config); --kubeconfig overrides it.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context is the kubeconfig context ("": its current one).
	Context string `json:"context,omitempty"`
	// Namespace holds the sandbox pods (default agentbox-sandboxes).
	Namespace string `json:"namespace,omitempty"`
	// ImagePullPolicy is Always, IfNotPresent (default) or Never.
	ImagePullPolicy string `json:"image_pull_policy,omitempty"`
	// AllowHostNetwork lets sandboxes have network "host" (hostNetwork
	// pods); off by default.
	AllowHostNetwork bool `json:"allow_host_network,omitempty"`
	// WorkspaceClaim names a PersistentVolumeClaim in Namespace holding
	// the data root, mounted by every sandbox with a subPath ("": hostPath,
	// for a single-node cluster that shares the server's file system).
	WorkspaceClaim string `json:"workspace_claim,omitempty"`
	// ClaimRoot is where this server mounts the same volume (default:
	// data_root), relative to the app folder or absolute.
	ClaimRoot string `json:"claim_root,omitempty"`
	// RuntimeClasses names the RuntimeClass of each sandbox isolation
	// (sandbox.isolation): {"gvisor": "gvisor", "kata": "kata-qemu"}. An
	// entry replaces the default (kubernetes.DefaultRuntimeClasses: gvisor
	// and kata under their own names, runc under none); "" takes the
	// isolation away.
	RuntimeClasses map[string]string `json:"runtime_classes,omitempty"`
	// PoolDir is the folder on the node through which pooled pods
	// (sandbox.pool) get their chat's workspace and sockets, relative to
	// the app folder or absolute (default: agentbox-kubernetes-pool in the
	// temporary folder). It must lie under a mount with shared propagation
	// that the kubelet's mount namespace receives.
	PoolDir string `json:"pool_dir,omitempty"`
	// BridgeListen, when set, is the TCP address of the server's bridge
	// gateway (":41890"): sandbox pods reach their bridge over the network
	// with mutual TLS and the request's token. "": Unix sockets on hostPath
	// volumes, which only a pod on the server's own node can use (a
	// single-node cluster).
	BridgeListen string `json:"bridge_listen,omitempty"`
	// BridgeAddress is the host:port sandbox pods dial ("": $POD_IP with
	// bridge_listen's port, else bridge_listen itself). It must reach this
	// server, not any replica: the session lives in one server.
	BridgeAddress string `json:"bridge_address,omitempty"`
}

// CleanupConfig configures the workspace retention job.
type CleanupConfig struct {
	// Schedule is a cron spec (default "0 3 * * *").
	Schedule string `json:"schedule,omitempty"`
	// Retention is how long an unused workspace is kept (default 7 days).
	// In app.jsonc it is "retention": a duration that may start with
	// whole days ("7d", "36h", "1d12h"), at least 1h.
	Retention time.Duration `json:"-"`
	// Checkpoints is how many checkpoints each chat keeps, the oldest
	// dropped first (default DefaultCheckpoints; 0: no checkpoints, so no
	// rewind or fork).
	Checkpoints int `json:"checkpoints"`
}

// DefaultCheckpoints is cleanup.checkpoints' default.
const DefaultCheckpoints = 50

// Connector is a model connector: a connectors/** file of type openai,
// anthropic or scripted. Option values may be $ENV.NAME references; call
// Resolve to get usable values.
type Connector struct {
	ID   string
	Type string // openai | anthropic | scripted
	// Label is an optional display name ("label" in the file); Name and
	// Version are the file's own, Description and Tags its MetaInfo.
	Label       string
	Name        string
	Version     string
	Description string
	Tags        []string
	// File is the source file relative to the app root, for messages.
	File    string
	Options ConnectorOptions
}

// ConnectorOptions are a connector's options, before $ENV resolution.
type ConnectorOptions struct {
	// Host is the API base URL: options.host, or Yao's older name
	// options.proxy when host is empty; "" means the type's public API.
	Host string
	// HostFrom says which option Host came from: "host", "proxy", or ""
	// when the connector names none (check prints it).
	HostFrom string
	Key      string
	Model    string
	// APIVersion is an anthropic connector's "version" option (the
	// anthropic-version header; "" = connector.AnthropicVersion).
	APIVersion string
	// AuthMode is the file's auth_mode: bearer, x-api-key or api-key ("" =
	// the type's default).
	AuthMode string
	// Script is the scripted connector's script file (relative to the
	// connector file).
	Script string
	// Capabilities are the model's declared capabilities (tool_calls,
	// vision, ...), kept for connector_options filters; never sent.
	Capabilities map[string]any
	// Protocols are the APIs a dual gateway speaks; never sent.
	Protocols []string
	// Extra holds the request fields the connector adds to every request,
	// already checked against its type's whitelist
	// (connector.RequestFields): temperature, max_tokens, thinking and
	// the whitelisted entries of extra_body.
	Extra map[string]any
	// Params is the file's supported_params: when set, a strict whitelist
	// with value bounds for the connector's request fields.
	Params map[string]connector.ParamSpec
}

// Assistant is one assistant folder: any folder under assistants/ that
// holds a package.yao.
type Assistant struct {
	ID          string
	Dir         string
	Name        string
	Description string
	// Connector is the connector id the assistant uses: package.yao's
	// "connector" with "use::<role>" and an empty value resolved through
	// agent/agent.yml, and "$ENV.NAME" replaced when the variable is set
	// at load (as Yao does). "" when ConnectorEnv names a variable that was
	// not set: requests resolve it then.
	Connector string
	// ConnectorRaw is "connector" as written in package.yao.
	ConnectorRaw string
	// ConnectorEnv is the variable of a "$ENV.NAME" connector that was not
	// set at load.
	ConnectorEnv string
	// ConnectorOptions say which connectors a request may choose instead
	// (nil: none).
	ConnectorOptions *ConnectorChoice
	// Options are the model options passed to the connector (package.yao
	// "options": temperature, max_tokens, ...).
	Options chat.ModelOptions
	// Overridable is which model options a request may change, within
	// which bounds (package.yao "overridable"; nil: the default rules, see
	// DefaultOverridable).
	Overridable *Overridable
	// Prompts come from prompts.yml (or package.yao "prompts").
	Prompts []chat.Message
	// PromptPresets come from prompts/**.yml and package.yao
	// "prompt_presets", by key ("chat.friendly" for prompts/chat/friendly.yml).
	PromptPresets map[string][]chat.Message
	// DisableGlobalPrompts leaves agent/prompts.yml out of this
	// assistant's requests.
	DisableGlobalPrompts bool
	// Locales are locales/<code>.yml, by lower-cased code, flattened to
	// dotted keys: what "{{key}}" in name, description and placeholder
	// translates to.
	Locales map[string]map[string]string
	// Meta is what package.yao says for the UI and permissions, shown by
	// the assistants API.
	Meta Metadata
	// Sandbox is nil for a direct (non-sandboxed) assistant.
	Sandbox *Sandbox
	// MCP lists the MCP servers the assistant uses, in package.yao's
	// order; each ServerID is a key of MCPServers.
	MCP []MCPRef
	// MCPServers are the definitions of the servers MCP references, by
	// the id the reference uses: an app server ("echo"), any assistant's
	// own by Yao's id ("agents.robot.host.tools"), or this assistant's own
	// by its short name ("clock" for mcps/clock.mcp.yao).
	MCPServers map[string]*MCPServer
	// ToolLoop bounds the rounds of tool calls a direct assistant's model
	// makes (package.yao mcp.options).
	ToolLoop ToolLoop
	// OwnMCPServers are this assistant's mcps/ definitions by Yao's id
	// ("agents.<assistant id>.<path>").
	OwnMCPServers map[string]*MCPServer
	// Skills are discovered from skills/ (name and description only). For
	// a turn (executor.Request.Assistant) they also hold the user's
	// approved skills that no skill of the folder shadows.
	Skills []*skills.Skill
	// SkillAuthoring, when set, lets the agent draft skills for its user
	// to approve (package.yao "skills": {"authoring": true}).
	SkillAuthoring *SkillAuthoring
	// Failures are the thresholds of the failure patterns a turn watches
	// for (package.yao "failures"; the zero value: the defaults).
	Failures Failures
	// Approval is the tool approval policy (package.yao "approval", else
	// app.jsonc's; nil: every call the agent makes is allowed).
	Approval *approval.Policy
	// Hooks is the hook entry file (src/index.ts or src/index.js), "" if none.
	Hooks string
	// HookTimeout bounds each hook call: package.yao "hooks": {"timeout":
	// "5s"}, 100ms to 10m (default 5s).
	HookTimeout time.Duration
	// Tools are the host tools the assistant's agent may call through the
	// bridge (package.yao "tools"); only these are visible to it.
	Tools []Tool
}

// Sandbox is an assistant's sandbox: package.yao's sandbox block (Yao v1
// or agentbox's form) or Yao's v2 sandbox.yao, parsed and range-checked.
type Sandbox struct {
	Command string // claude | cursor
	Image   string
	Runtime string // docker | kubernetes | local; app.jsonc's default is applied at load ("" = the server's default)
	// Isolation is runc, gvisor or kata (sandbox.IsolationRunc, ...):
	// sandbox.isolation, else app.jsonc's, else "" (runc).
	Isolation   string
	MemoryBytes int64
	// DiskBytes limits the chat's workspace (sandbox.max_disk, else
	// app.jsonc's sandbox.max_disk, else DefaultDisk).
	DiskBytes int64
	CPUs      float64
	Timeout   time.Duration
	// KeepAlive (sandbox.keep_alive) keeps a chat's sandbox and its CLI
	// running for this long after a turn, for the chat's next message
	// (0, the default: every turn starts a sandbox and a CLI). Off by
	// default because a kept chat holds a container and a CLI of some
	// 280 MiB while its user reads and types.
	KeepAlive time.Duration
	// Pool (sandbox.pool) asks for this many sandboxes of the assistant
	// made ahead of demand, so that a new chat claims a running one
	// instead of waiting for its start (0, the default: none); bounded by
	// app.jsonc's limits.pool.
	Pool int
	// Network is none or host; app.jsonc's default is applied at load (""
	// = the server's default). It is none when Egress is set.
	Network string
	// Egress is the allow-list policy when sandbox.network is an object
	// (nil otherwise); app.jsonc's default is applied at load.
	Egress *Egress
	// Secrets are the credentials the sandbox holds only as placeholders
	// (sandbox.secrets, Yao's v1 and v2 forms too), by variable name; they
	// need Egress.
	Secrets   map[string]Secret
	Arguments chat.Arguments
	// Version is "2.0" for a Yao v2 sandbox, "" otherwise.
	Version string
	// Environment is set in the sandbox (Yao v2's environment; $ENV.NAME
	// values resolved per request; an unset variable fails the request).
	Environment map[string]string
	// Prepare are v2's prepare steps, run in the sandbox before the CLI.
	Prepare []PrepareStep
	// Desktop, when set, gives the sandbox a live desktop (sandbox.desktop,
	// Yao v2's computer.vnc).
	Desktop *Desktop
	// Ports are the ports the sandbox may serve to the chat's user as
	// previews (sandbox.ports, computer.ports, services): each that
	// listens gets a preview URL while the sandbox lives (package preview).
	Ports []Port
	// File is the file the sandbox was defined in, relative to the app
	// root (package.yao or sandbox.yao).
	File string
}

// PrepareStep is one of a v2 sandbox's prepare steps: exec runs Cmd with
// sh -c in the workspace; copy copies Src (relative to the assistant
// folder) to Dst in the sandbox. Once skips the step when it already ran
// in this workspace with the same sandbox definition; IgnoreError goes
// on when it fails; Background starts Cmd without waiting for it.
type PrepareStep struct {
	Action      string
	Cmd         string
	Src, Dst    string
	Once        bool
	IgnoreError bool
	Background  bool
}

// ToolLoop is package.yao's mcp.options as Yao's tool loop reads them
// (agent/assistant/loop.go): after the model's first tool calls, each
// round sends their results back until the model answers without calling
// a tool, at most MaxTurns rounds.
type ToolLoop struct {
	// MaxTurns is mcp.options.max_turn (DefaultMaxToolTurns when unset).
	MaxTurns int
	// Disabled is mcp.options.tool_loop false: the results of the first
	// tool calls are the answer's tools, and no round follows.
	Disabled bool
}

// MCPRef is one entry of the mcp.servers block.
type MCPRef struct {
	ServerID string
	// Tools limits the server's tools ("" or empty: all).
	Tools []string
	// Resources is Yao's resource filter, kept but not enforced (a warning
	// says so at load).
	Resources []string
}

// ConnectorChoice is package.yao "connector_options": whether a request
// may choose another connector, and which.
type ConnectorChoice struct {
	// Optional: nil = Yao's default (shown), false = hidden, true = shown.
	Optional *bool `json:"optional"`
	// Connectors are the ids a request may choose (empty: any model
	// connector that passes Filters).
	Connectors []string `json:"connectors,omitempty"`
	// Filters are capabilities a chosen connector must declare
	// (tool_calls, vision, ...).
	Filters []string `json:"filters,omitempty"`
}

// Metadata is what package.yao says about an assistant for the UI and
// permissions. agentbox keeps it and shows it in the assistants API; it
// changes nothing in how a turn runs.
type Metadata struct {
	// Type is the assistant's category ("assistant" by default; worker,
	// robot-..., not the connector type).
	Type         string       `json:"type,omitempty"`
	Avatar       string       `json:"avatar,omitempty"`
	Tags         []string     `json:"tags,omitempty"`
	Sort         int          `json:"sort,omitempty"`
	Readonly     bool         `json:"readonly,omitempty"`
	Public       bool         `json:"public,omitempty"`
	Share        string       `json:"share,omitempty"`
	Mentionable  bool         `json:"mentionable,omitempty"`
	Automated    bool         `json:"automated,omitempty"`
	BuiltIn      bool         `json:"built_in,omitempty"`
	Placeholder  *Placeholder `json:"placeholder,omitempty"`
	Modes        []string     `json:"modes,omitempty"`
	DefaultMode  string       `json:"default_mode,omitempty"`
	Capabilities string       `json:"capabilities,omitempty"`
	// CreatedAt and UpdatedAt are the dates as written.
	CreatedAt string `json:"created_at,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// Placeholder is what a chat UI shows before the first message.
type Placeholder struct {
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Prompts     []string `json:"prompts,omitempty"`
}

// MCPServer is a mcps/**/*.mcp.{yao,json,jsonc} definition in Yao's MCP
// client format.
type MCPServer struct {
	// ID is Yao's id: "foo.bar" for the app's mcps/foo/bar.mcp.yao,
	// "agents.<assistant>.<path>" for an assistant's.
	ID string
	// File is the source file relative to the app root, for messages.
	File string
	// Transport is "stdio", "http", "sse" or "process".
	Transport string
	Command   string
	// Args are "arguments" (Yao) or "args".
	Args []string
	// Env values may be $ENV.NAME, resolved at request time.
	Env map[string]string
	URL string
	// Headers include "authorization_token" as Authorization.
	Headers map[string]string
	// Timeout is the file's timeout (kept; the CLIs apply their own).
	Timeout time.Duration
	// Label, Name and Description are the file's own.
	Label, Name, Description string
	// Process is what a process server (transport "process") maps to the
	// app's processes; nil for the other transports.
	Process *ProcessMapping
}

// Tool is one host tool an assistant declares. It runs on the host, with
// the request's user, chat and deadline, when the agent calls
// mcp__agentbox__<Name>.
type Tool struct {
	// Name is what the agent sees: 1-48 of [A-Za-z0-9_-].
	Name string
	// Function is the hook function implementing the tool; "" means a Go
	// tool the embedder registered on the pipeline under Name.
	Function    string
	Description string
	// Parameters is the JSON Schema of the tool's arguments.
	Parameters []byte
	// Timeout bounds one call (0: the bridge default, 30s).
	Timeout time.Duration
}
