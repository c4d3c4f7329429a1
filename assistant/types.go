// Package assistant loads an app folder: the app settings, connectors,
// assistants with their prompts, MCP server definitions, skills and hook
// source. Loading is strict: unknown fields, wrong types and out-of-range
// values are errors that name the file, line and column.
package assistant

import (
	"time"

	"github.com/agentbox/agentbox/chat"
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
	// Assistants by id (the folder name under assistants/).
	Assistants map[string]*Assistant
}

// AppConfig is app.jsonc.
type AppConfig struct {
	// DataRoot holds workspaces and the store (default: ROOT/data).
	DataRoot string `json:"data_root,omitempty"`
	// Listen is the HTTP listen address (default 127.0.0.1:8080).
	Listen string `json:"listen,omitempty"`
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
}

// AuthConfig maps bearer tokens to users.
type AuthConfig struct {
	// Tokens: [{"token": "$ENV.AGENTBOX_TOKEN", "user": "alice"}].
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
}

// SandboxDefaults apply to every sandboxed assistant that does not set its
// own value.
type SandboxDefaults struct {
	Runtime string `json:"runtime,omitempty"` // docker | local
	Network string `json:"network,omitempty"` // none | host (none with Egress)
	// Egress is the default allow-list policy, when app.jsonc's
	// sandbox.network is an object.
	Egress *Egress `json:"-"`
	// MaxDisk is the default workspace disk limit, as written ("10g");
	// DiskBytes is it parsed (DefaultDisk when unset).
	MaxDisk   string `json:"max_disk,omitempty"`
	DiskBytes int64  `json:"-"`
	// Images per command: {"claude": "agentbox/sandbox-claude:latest"}.
	Images map[string]string `json:"images,omitempty"`
}

// CleanupConfig configures the workspace retention job.
type CleanupConfig struct {
	// Schedule is a cron spec (default "0 3 * * *").
	Schedule string `json:"schedule,omitempty"`
	// Retention is how long an unused workspace is kept (default 7 days).
	// In app.jsonc it is "retention": a duration that may start with
	// whole days ("7d", "36h", "1d12h"), at least 1h.
	Retention time.Duration `json:"-"`
}

// Connector is a connectors/**/*.conn.yao file. Option values may be
// $ENV.NAME references; call Resolve to get usable values.
type Connector struct {
	ID   string
	Type string // openai | anthropic | scripted
	// Label is an optional display name ("label" in the file).
	Label string
	// File is the source file relative to the app root, for messages.
	File    string
	Options ConnectorOptions
}

// ConnectorOptions are a connector's raw options, before $ENV resolution.
type ConnectorOptions struct {
	Host  string
	Key   string
	Model string
	// Script is the scripted connector's script file (relative to the
	// connector file).
	Script string
	// Extra holds any other option, passed to the model as-is.
	Extra map[string]any
}

// Assistant is one assistants/<id>/ folder.
type Assistant struct {
	ID          string
	Dir         string
	Name        string
	Description string
	// Connector is the connector id.
	Connector string
	// Options are the model options passed to the connector (package.yao
	// "options": temperature, max_tokens, ...).
	Options chat.ModelOptions
	// Overridable is which model options a request may change, within
	// which bounds (package.yao "overridable"; nil: the default rules, see
	// DefaultOverridable).
	Overridable *Overridable
	// Prompts come from prompts.yml.
	Prompts []chat.Message
	// Sandbox is nil for a direct (non-sandboxed) assistant.
	Sandbox *Sandbox
	// MCP lists the MCP servers the assistant uses, resolved against
	// MCPServers.
	MCP []MCPRef
	// MCPServers are the definitions found in mcps/, by id.
	MCPServers map[string]*MCPServer
	// Skills are discovered from skills/ (name and description only).
	Skills []*skills.Skill
	// Hooks is the hook entry file (src/index.ts or src/index.js), "" if none.
	Hooks string
	// HookTimeout bounds each hook call: package.yao "hooks": {"timeout":
	// "5s"}, 100ms to 10m (default 5s).
	HookTimeout time.Duration
	// Tools are the host tools the assistant's agent may call through the
	// bridge (package.yao "tools"); only these are visible to it.
	Tools []Tool
}

// Sandbox is an assistant's sandbox block, parsed and range-checked.
type Sandbox struct {
	Command     string // claude | cursor
	Image       string
	Runtime     string // docker | local; app.jsonc's default is applied at load ("" = the server's default)
	MemoryBytes int64
	// DiskBytes limits the chat's workspace (sandbox.max_disk, else
	// app.jsonc's sandbox.max_disk, else DefaultDisk).
	DiskBytes int64
	CPUs      float64
	Timeout   time.Duration
	// Network is none or host; app.jsonc's default is applied at load (""
	// = the server's default). It is none when Egress is set.
	Network string
	// Egress is the allow-list policy when sandbox.network is an object
	// (nil otherwise); app.jsonc's default is applied at load.
	Egress *Egress
	// Secrets are the credentials the sandbox holds only as placeholders
	// (sandbox.secrets), by variable name; they need Egress.
	Secrets   map[string]Secret
	Arguments chat.Arguments
}

// MCPRef is one entry of the mcp.servers block.
type MCPRef struct {
	ServerID string
	// Tools limits the server's tools ("" or empty: all).
	Tools []string
}

// MCPServer is a mcps/**/*.mcp.{yao,json,jsonc} definition.
type MCPServer struct {
	ID string
	// File is the source file relative to the app root, for messages.
	File string
	// Transport is "stdio", "http" or "sse".
	Transport string
	Command   string
	Args      []string
	// Env values may be $ENV.NAME, resolved at request time.
	Env     map[string]string
	URL     string
	Headers map[string]string
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
