package claude

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// Workspace paths the executor owns, relative to the workspace root. Only
// the assistant definition configures the CLI: everything it reads is in
// the assistant's folder, rebuilt on every run, and the CLI is told to load
// nothing from the workspace (see Paths and prepare).
const (
	// ConfigRoot holds the CLI's state of every assistant of the chat, one
	// folder each (ConfigPaths), so that the session, skills and settings
	// of one assistant never reach another's run in the same chat.
	ConfigRoot = ".agentbox/claude"
	// SystemPromptFile holds a run's appended system prompt; the run
	// removes it when it ends (see RunFiles).
	SystemPromptFile = ConfigRoot + "/system-prompt.md"
)

// Paths are the workspace paths of one assistant's CLI configuration,
// relative to the workspace root.
type Paths struct {
	// Dir is the assistant's folder: ConfigRoot/assistants/ID.
	Dir string
	// Config is the CLI's CLAUDE_CONFIG_DIR: sessions and transcripts
	// (projects/), which are kept, and what the CLI writes for itself,
	// which is not. Skills is its skills folder, synced from the
	// assistant's skills on every run.
	Config, Skills string
	// MCPConfig is the --mcp-config file, rewritten on every run.
	MCPConfig string
}

// ConfigPaths returns the paths of the assistant's CLI configuration.
func ConfigPaths(assistantID string) Paths {
	dir := ConfigRoot + "/assistants/" + folderName(assistantID)
	return Paths{
		Dir:       dir,
		Config:    dir + "/config",
		Skills:    dir + "/config/skills",
		MCPConfig: dir + "/mcp.json",
	}
}

// folderName is id when it is a safe folder name (assistant ids are), else
// a hash of it.
func folderName(id string) string {
	if safeFolder.MatchString(id) {
		return id
	}
	return "id-" + uuid.NewSHA1(sessionNamespace, []byte(id)).String()
}

var safeFolder = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// sessionNamespace seeds the deterministic session ids (UUID v5).
var sessionNamespace = uuid.MustParse("5b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41")

// SessionID returns the chat's Claude session id: a UUID v5 derived from
// the assistant, user and chat ids, so every request of a chat finds the
// same session without any lookup table.
func SessionID(assistantID, userID, chatID string) string {
	return uuid.NewSHA1(sessionNamespace, []byte(assistantID+"\x00"+userID+"\x00"+chatID)).String()
}

// hasTranscript reports whether the CLI saved a transcript for session id
// under the config dir (projects/<encoded cwd>/<id>.jsonl). Any project
// folder counts: the encoding of the working directory is the CLI's
// business.
func hasTranscript(ctx context.Context, ws *sandbox.Workspace, config, id string) bool {
	dirs, err := ws.ListDir(ctx, config+"/projects")
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if !d.IsDir {
			continue
		}
		st, err := ws.Stat(ctx, path.Join(config, "projects", d.Name, id+".jsonl"))
		if err == nil && !st.IsDir && st.Size > 0 {
			return true
		}
	}
	return false
}

// mcpConfig is the result of building .mcp.json.
type mcpConfig struct {
	JSON []byte
	// Env holds the values the ${...} references in JSON point to.
	Env map[string]string
	// Allowed are tool names to pre-approve (mcp__server or
	// mcp__server__tool).
	Allowed []string
	// Servers are the configured server names, sorted.
	Servers []string
	// all is the whole configuration (agentcli.Plan.MCP).
	all *agentcli.MCPConfig
}

// mcpFormat is .mcp.json's: ${NAME} references, and the type member Claude
// Code requires.
var mcpFormat = agentcli.MCPFormat{
	Reference: func(name string) string { return "${" + name + "}" },
	Type:      true,
}

// buildMCPConfig resolves the assistant's MCP references against its
// server definitions, adds the request's extra servers, and returns the
// .mcp.json content with every env value (none a credential) moved into
// the process environment (agentcli.ResolveMCP): .mcp.json holds only
// ${AGENTBOX_MCP_...} references, which the CLI expands from its own
// environment. Every server's tools are pre-approved, or only those the
// assistant's reference names.
func buildMCPConfig(a *assistant.Assistant, extra map[string]assistant.MCPServer, relay string, pass map[string]string) (*mcpConfig, error) {
	cfg, err := agentcli.ResolveMCP(a, extra, mcpFormat, relay, pass)
	if err != nil {
		return nil, err
	}
	out := &mcpConfig{JSON: cfg.File, Env: cfg.Env, Servers: cfg.Names(), all: cfg}
	for _, s := range cfg.Servers {
		if len(s.Tools) == 0 {
			out.Allowed = append(out.Allowed, "mcp__"+toolNamePart(s.Name))
		}
		for _, t := range s.Tools {
			out.Allowed = append(out.Allowed, "mcp__"+toolNamePart(s.Name)+"__"+toolNamePart(t))
		}
	}
	return out, nil
}

// toolNamePart normalizes a server or tool name the way Claude Code does
// in mcp__server__tool names.
func toolNamePart(s string) string {
	return toolNameUnsafe.ReplaceAllString(s, "_")
}

var toolNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// prepared is what preparation leaves for the command.
type prepared struct {
	paths     Paths
	mcp       *mcpConfig
	resume    bool
	sessionID string
	// forkOf is the session a fork's first run forks (--fork-session):
	// the nearest of the chats it was forked from whose transcript the
	// workspace holds, when it has none of its own.
	forkOf string
	// promptFile is set when a system prompt file was written.
	promptFile bool
}

// prepare rebuilds the assistant's CLI configuration for this run, in the
// config dir the driver emptied but for the CLI's session transcripts
// (cli.Profile): skills and the MCP configuration are written from the
// definition, and
// the chat's former shared config dir is cleared. What the agent left is
// never opened or followed (a FIFO where a file goes is replaced), and ctx
// bounds it all.
func prepare(ctx context.Context, ws *sandbox.Workspace, req *runInput) (*prepared, error) {
	mcp, err := buildMCPConfig(req.assistant, req.extraMCP, req.relay, req.mcpEnv)
	if err != nil {
		return nil, err
	}
	paths := ConfigPaths(req.assistant.ID)
	if err := clearFormer(ctx, ws); err != nil {
		return nil, err
	}
	if err := ws.WriteFile(ctx, paths.MCPConfig, mcp.JSON, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", paths.MCPConfig, err)
	}
	if err := skills.Sync(ctx, ws, paths.Skills, req.skills); err != nil {
		return nil, err
	}
	p := &prepared{paths: paths, mcp: mcp, sessionID: req.sessionID}
	p.resume = hasTranscript(ctx, ws, paths.Config, p.sessionID)
	for _, from := range req.forkedFrom {
		if p.resume || p.forkOf != "" {
			break
		}
		if hasTranscript(ctx, ws, paths.Config, from) {
			p.forkOf = from
		}
	}
	prompt := req.system
	if !p.resume && p.forkOf == "" && len(req.history) > 0 {
		prompt = appendHistory(prompt, req.history)
	}
	if err := ws.RemoveAll(ctx, SystemPromptFile); err != nil {
		return nil, fmt.Errorf("reset system prompt: %w", err)
	}
	if strings.TrimSpace(prompt) != "" {
		if err := ws.WriteFile(ctx, SystemPromptFile, []byte(prompt), 0o600); err != nil {
			return nil, fmt.Errorf("write system prompt: %w", err)
		}
		p.promptFile = true
	}
	return p, nil
}

// uuidGlob matches a session id (a UUID) as a path.Match pattern.
var uuidGlob = func() string {
	h := func(n int) string { return strings.Repeat("[0-9a-fA-F]", n) }
	return h(8) + "-" + h(4) + "-" + h(4) + "-" + h(4) + "-" + h(12)
}()

// clearFormer removes what the chat's former shared config dir holds
// (ConfigRoot was CLAUDE_CONFIG_DIR for every assistant: its settings,
// memory, skills and sessions). A chat that had a session there goes on
// from its history, given in the system prompt, as after a lost
// workspace.
func clearFormer(ctx context.Context, ws *sandbox.Workspace) error {
	entries, err := ws.ListDir(ctx, ConfigRoot)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.Name == "assistants" || e.Name == path.Base(SystemPromptFile) {
			continue
		}
		if err := ws.RemoveAll(ctx, path.Join(ConfigRoot, e.Name)); err != nil {
			return fmt.Errorf("reset former config dir: %w", err)
		}
	}
	return nil
}

// appendHistory adds the prior conversation to the system prompt, for a
// chat whose session transcript is not on disk (first turn with history
// from the client, or a lost workspace).
func appendHistory(system string, history []chat.Message) string {
	var sb strings.Builder
	n := len(system) + 256
	for _, m := range history {
		n += len(m.Content) + 64
	}
	sb.Grow(n)
	sb.WriteString(system)
	if system != "" {
		sb.WriteString("\n\n")
	}
	sb.WriteString("# Conversation so far\n\nThe messages below were exchanged earlier in this conversation, oldest first. Continue from them; the user's new message follows.\n")
	for _, m := range history {
		role := m.Role
		if role == "" {
			role = chat.RoleUser
		}
		sb.WriteString("\n<message role=\"")
		sb.WriteString(role)
		if m.Name != "" {
			sb.WriteString("\" name=\"")
			sb.WriteString(m.Name)
		}
		sb.WriteString("\">\n")
		sb.WriteString(m.Content)
		sb.WriteString("\n</message>\n")
	}
	return sb.String()
}
