package claude

import (
	"context"
	"fmt"
	"os"
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

// Workspace paths the executor owns, relative to the workspace root.
const (
	// MCPConfigFile is rewritten from the assistant's MCP servers on every
	// run.
	MCPConfigFile = ".mcp.json"
	// SkillsDir is synced from the assistant's skills on every run.
	SkillsDir = ".claude/skills"
	// ConfigDir is the chat's CLAUDE_CONFIG_DIR: sessions, transcripts and
	// the CLI's own state live here, so they outlive the container.
	ConfigDir = ".agentbox/claude"
	// SystemPromptFile holds the run's appended system prompt.
	SystemPromptFile = ConfigDir + "/system-prompt.md"
)

// sessionNamespace seeds the deterministic session ids (UUID v5).
var sessionNamespace = uuid.MustParse("5b0f7c8e-3d0a-4c59-9f3e-6a1d2c7b8e41")

// SessionID returns the chat's Claude session id: a UUID v5 derived from
// the assistant, user and chat ids, so every request of a chat finds the
// same session without any lookup table.
func SessionID(assistantID, userID, chatID string) string {
	return uuid.NewSHA1(sessionNamespace, []byte(assistantID+"\x00"+userID+"\x00"+chatID)).String()
}

// hasTranscript reports whether the CLI saved a transcript for session id
// under the chat's config dir (projects/<encoded cwd>/<id>.jsonl). Any
// project folder counts: the encoding of the working directory is the
// CLI's business.
func hasTranscript(ctx context.Context, ws *sandbox.Workspace, id string) bool {
	dirs, err := ws.ListDir(ctx, ConfigDir+"/projects")
	if err != nil {
		return false
	}
	for _, d := range dirs {
		if !d.IsDir {
			continue
		}
		st, err := ws.Stat(ctx, path.Join(ConfigDir, "projects", d.Name, id+".jsonl"))
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
}

// mcpFormat is .mcp.json's: ${NAME} references, and the type member Claude
// Code requires.
var mcpFormat = agentcli.MCPFormat{
	Reference: func(name string) string { return "${" + name + "}" },
	Type:      true,
}

// buildMCPConfig resolves the assistant's MCP references against its
// server definitions, adds the request's extra servers, and returns the
// .mcp.json content with every env and header value moved into the
// process environment (agentcli.ResolveMCP): .mcp.json holds only
// ${AGENTBOX_MCP_...} references, which the CLI expands from its own
// environment. Every server's tools are pre-approved, or only those the
// assistant's reference names.
func buildMCPConfig(a *assistant.Assistant, extra map[string]assistant.MCPServer, lookup func(string) (string, bool)) (*mcpConfig, error) {
	cfg, err := agentcli.ResolveMCP(a, extra, lookup, mcpFormat)
	if err != nil {
		return nil, err
	}
	out := &mcpConfig{JSON: cfg.File, Env: cfg.Env, Servers: cfg.Names()}
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
	mcp       *mcpConfig
	resume    bool
	sessionID string
	// promptFile is set when a system prompt file was written.
	promptFile bool
}

// prepare rewrites the workspace's CLI configuration for this run. What
// the agent left in the workspace is never opened or followed (a FIFO at
// .mcp.json is replaced), and ctx bounds it all.
func prepare(ctx context.Context, ws *sandbox.Workspace, req *runInput, lookup func(string) (string, bool)) (*prepared, error) {
	mcp, err := buildMCPConfig(req.assistant, req.extraMCP, lookup)
	if err != nil {
		return nil, err
	}
	if err := ws.RemoveAll(ctx, MCPConfigFile); err != nil {
		return nil, fmt.Errorf("reset %s: %w", MCPConfigFile, err)
	}
	if err := ws.WriteFile(ctx, MCPConfigFile, mcp.JSON, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", MCPConfigFile, err)
	}
	if err := skills.Sync(ctx, ws, SkillsDir, req.skills); err != nil {
		return nil, err
	}
	if err := ws.MkdirAll(ctx, ConfigDir); err != nil {
		return nil, fmt.Errorf("config dir: %w", err)
	}
	// Only the sandbox user (the owner) may read the chat's CLI state.
	for _, d := range []string{".agentbox", ConfigDir} {
		if err := ws.Chmod(ctx, d, 0o700); err != nil {
			return nil, fmt.Errorf("config dir: %w", err)
		}
	}
	// A settings file left in the config dir could add hooks or change
	// permissions; the run's settings come from the assistant only.
	for _, f := range []string{"settings.json", "settings.local.json"} {
		if err := ws.RemoveAll(ctx, path.Join(ConfigDir, f)); err != nil {
			return nil, fmt.Errorf("reset %s: %w", f, err)
		}
	}
	p := &prepared{mcp: mcp, sessionID: req.sessionID}
	p.resume = hasTranscript(ctx, ws, p.sessionID)
	prompt := req.system
	if !p.resume && len(req.history) > 0 {
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

// osLookup is the default lookup for $ENV references.
var osLookup = os.LookupEnv
