package cursor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/skills"
)

// Workspace paths the executor owns, relative to the workspace root. Each
// is rewritten on every run from the assistant's definition, so nothing
// the agent left there outlives the run.
const (
	// MCPConfigFile is the project MCP configuration the CLI reads
	// (https://cursor.com/docs/mcp: "Create .cursor/mcp.json in your
	// project").
	MCPConfigFile = ".cursor/mcp.json"
	// SkillsDir holds the assistant's Agent Skills, where Cursor discovers
	// project skills (https://cursor.com/docs/context/skills).
	SkillsDir = ".cursor/skills"
	// RulesDir holds the project rules the executor writes: the system
	// prompt and the list of skills, as .mdc rules with alwaysApply
	// (https://cursor.com/docs/context/rules). Other rules under
	// .cursor/rules belong to the project and are left alone.
	RulesDir = ".cursor/rules/agentbox"
	// PermissionsFile is the project CLI permissions file
	// (https://cursor.com/docs/cli/reference/permissions), written from
	// the assistant's allowed_tools and disallowed_tools.
	PermissionsFile = ".cursor/cli.json"
	// HooksFile is the project's hooks (https://cursor.com/docs/agent/hooks),
	// commands the CLI runs on its events: removed before every run, so
	// the agent cannot leave commands for a later one.
	HooksFile = ".cursor/hooks.json"
	// StateDir is the chat's CLI state: the config dir, the home, the
	// session file and the run's prompt file.
	StateDir = ".agentbox/cursor"
	// ConfigDir is the CLI's CURSOR_CONFIG_DIR, kept with the chat so its
	// chats outlive the container; everything else in it (its
	// cli-config.json, a user-level mcp.json or hooks.json) is removed
	// before every run.
	ConfigDir = StateDir + "/config"
	// HomeDir is the CLI's HOME, emptied before every run but for chats
	// the CLI may keep there (~/.cursor/chats): the user-level
	// ~/.cursor/mcp.json and hooks.json are not kept.
	HomeDir = StateDir + "/home"
	// SessionFile records the chat id of the last successful run, so the
	// next run resumes it (the driver's, agentcli.SessionFile).
	SessionFile = StateDir + "/" + agentcli.SessionFile
	// PromptFile holds the run's input when it is too large (or needs the
	// history) to go on the command line; it is removed after the run.
	PromptFile = StateDir + "/prompt.md"
)

// mcpConfig is the result of building mcp.json.
type mcpConfig struct {
	JSON []byte
	// Env holds the values the ${env:...} references in JSON point to.
	Env map[string]string
	// Servers are the configured server names, sorted.
	Servers []string
	// Filtered lists servers whose MCP reference names tools: they run
	// behind the MCP filter, which exposes only those (the CLI has no way
	// to).
	Filtered []string
	// all is the whole configuration (agentcli.Plan.MCP).
	all *agentcli.MCPConfig
}

// mcpFormat is mcp.json's: ${env:NAME} references ("Config
// interpolation", https://cursor.com/docs/mcp) and no type member.
var mcpFormat = agentcli.MCPFormat{
	Reference: func(name string) string { return "${env:" + name + "}" },
}

// buildMCPConfig resolves the assistant's MCP references against its
// server definitions, adds the request's extra servers, and returns the
// mcp.json content with every env value (none a credential) moved into the
// process environment (agentcli.ResolveMCP): mcp.json holds only
// ${env:AGENTBOX_MCP_...} references, which the CLI resolves from its own
// environment ("Config interpolation", https://cursor.com/docs/mcp).
// Stdio servers have a command, remote ones (http, sse) a url: Cursor
// tells the transports apart itself.
func buildMCPConfig(a *assistant.Assistant, extra map[string]assistant.MCPServer, relay string, pass map[string]string) (*mcpConfig, error) {
	cfg, err := agentcli.ResolveMCP(a, extra, mcpFormat, relay, pass)
	if err != nil {
		return nil, err
	}
	out := &mcpConfig{JSON: cfg.File, Env: cfg.Env, Servers: cfg.Names(), all: cfg}
	for _, s := range cfg.Servers {
		if s.Filtered {
			out.Filtered = append(out.Filtered, s.Name)
		}
	}
	return out, nil
}

// permissionPattern is the CLI's permission syntax: Shell(cmd),
// Read(glob), Write(glob), WebFetch(domain), Mcp(server:tool).
var permissionPattern = regexp.MustCompile(`^(Shell|Read|Write|WebFetch|Mcp)\(.+\)$`)

// buildPermissions returns the cli.json content for the assistant's
// allowed and disallowed tools, nil when it sets none.
func buildPermissions(args chat.Arguments) ([]byte, error) {
	check := func(field string, list []string) ([]string, error) {
		out := []string{}
		for _, s := range list {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			if !permissionPattern.MatchString(s) {
				return nil, &argError{fmt.Errorf("%s %q: the cursor command takes Cursor CLI permissions: Shell(cmd), Read(glob), Write(glob), WebFetch(domain) or Mcp(server:tool)", field, s)}
			}
			out = append(out, s)
		}
		return out, nil
	}
	allow, err := check("allowed_tools", args.AllowedTools)
	if err != nil {
		return nil, err
	}
	deny, err := check("disallowed_tools", args.DisallowedTools)
	if err != nil {
		return nil, err
	}
	if len(allow) == 0 && len(deny) == 0 {
		return nil, nil
	}
	b, err := json.MarshalIndent(map[string]any{"permissions": map[string]any{"allow": allow, "deny": deny}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode permissions: %w", err)
	}
	return append(b, '\n'), nil
}

// argError is a sandbox argument the cursor command cannot take: the
// request is invalid, not the sandbox broken.
type argError struct{ error }

func (e *argError) Unwrap() error { return e.error }

// runInput is the part of a request preparation needs.
type runInput struct {
	assistant *assistant.Assistant
	chatID    string
	extraMCP  map[string]assistant.MCPServer
	args      chat.Arguments
	system    string
	history   []chat.Message
	input     []chat.Message
	// inlineMax is the largest input passed on the command line.
	inlineMax int
	// relay runs the MCP filter (executor.Request.Relay).
	relay string
	// mcpEnv is executor.Request.MCPServerEnv.
	mcpEnv map[string]string
	// resume is the chat id to resume (agentcli.Prepared.Resume).
	resume string
}

// prepared is what preparation leaves for the command.
type prepared struct {
	mcp *mcpConfig
	// resume is the chat id to resume ("" for a new chat).
	resume string
	// prompt is the command line's prompt.
	prompt string
	// promptFile is set when the input went to PromptFile.
	promptFile bool
}

// prepare rewrites the workspace's CLI configuration for this run (the
// files the executor owns; the driver emptied the config dir and the
// home but for the CLI's chats) and decides how
// the input reaches the CLI. What the agent left in the workspace is never
// opened or followed (a FIFO at .cursor/mcp.json is replaced), and ctx
// bounds it all.
func prepare(ctx context.Context, ws *sandbox.Workspace, in *runInput) (*prepared, error) {
	mcp, err := buildMCPConfig(in.assistant, in.extraMCP, in.relay, in.mcpEnv)
	if err != nil {
		return nil, err
	}
	perms, err := buildPermissions(in.args)
	if err != nil {
		return nil, err
	}
	// Skills first: Sync also replaces a .cursor that is not a real folder.
	if err := skills.Sync(ctx, ws, SkillsDir, in.assistant.Skills); err != nil {
		return nil, err
	}
	for _, f := range []string{MCPConfigFile, PermissionsFile, HooksFile} {
		if err := ws.RemoveAll(ctx, f); err != nil {
			return nil, fmt.Errorf("reset %s: %w", f, err)
		}
	}
	if err := ws.WriteFile(ctx, MCPConfigFile, mcp.JSON, 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", MCPConfigFile, err)
	}
	if perms != nil {
		if err := ws.WriteFile(ctx, PermissionsFile, perms, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", PermissionsFile, err)
		}
	}
	if err := writeRules(ctx, ws, in.system, in.assistant.Skills); err != nil {
		return nil, err
	}
	if err := ws.RemoveAll(ctx, PromptFile); err != nil {
		return nil, fmt.Errorf("reset prompt: %w", err)
	}
	p := &prepared{mcp: mcp, resume: in.resume}
	var history []chat.Message
	if p.resume == "" {
		history = in.history
	}
	text := inputText(in.input)
	if len(history) == 0 && len(text) <= in.inlineMax && inlineSafe(text) {
		p.prompt = text
		return p, nil
	}
	body := promptFileBody(history, text)
	if err := ws.WriteFile(ctx, PromptFile, []byte(body), 0o600); err != nil {
		return nil, fmt.Errorf("write prompt: %w", err)
	}
	p.promptFile = true
	p.prompt = fmt.Sprintf("Your input for this turn is in the file %s/%s (%d bytes). Read all of it first, then respond to the user's new message at its end as if it had been written here.",
		sandbox.Workdir, PromptFile, len(body))
	return p, nil
}

// inlineSafe reports whether text can be the command line's prompt: it
// must not read as an option and must hold no NUL.
func inlineSafe(text string) bool {
	return text != "" && !strings.HasPrefix(text, "-") && !strings.ContainsRune(text, 0)
}

// inputText joins the turn's new messages; messages from other roles are
// labelled.
func inputText(input []chat.Message) string {
	var sb strings.Builder
	for i, m := range input {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		if m.Role != "" && m.Role != chat.RoleUser {
			sb.WriteString("[" + m.Role + "]: ")
		}
		sb.WriteString(m.Content)
	}
	return sb.String()
}

// promptFileBody is PromptFile's content: the conversation so far (for a
// chat with no session to resume) and the new message.
func promptFileBody(history []chat.Message, text string) string {
	var sb strings.Builder
	n := len(text) + 512
	for _, m := range history {
		n += len(m.Content) + 64
	}
	sb.Grow(n)
	if len(history) > 0 {
		sb.WriteString("# Conversation so far\n\nThe messages below were exchanged earlier in this conversation, oldest first. Continue from them.\n")
		for _, m := range history {
			role := m.Role
			if role == "" {
				role = chat.RoleUser
			}
			sb.WriteString("\n<message role=\"" + role)
			if m.Name != "" {
				sb.WriteString("\" name=\"" + m.Name)
			}
			sb.WriteString("\">\n")
			sb.WriteString(m.Content)
			sb.WriteString("\n</message>\n")
		}
		sb.WriteString("\n")
	}
	sb.WriteString("# The user's new message\n\n")
	sb.WriteString(text)
	sb.WriteString("\n")
	return sb.String()
}

// writeRules replaces RulesDir with the run's rules: system.mdc with the
// system prompt and skills.mdc listing the skills, both always applied.
func writeRules(ctx context.Context, ws *sandbox.Workspace, system string, list []*skills.Skill) error {
	// .cursor/rules must be a real folder: a link the agent planted would
	// send the rules elsewhere.
	if st, err := ws.Lstat(ctx, ".cursor/rules"); err == nil && !st.IsDir {
		if err := ws.RemoveAll(ctx, ".cursor/rules"); err != nil {
			return fmt.Errorf("reset rules: %w", err)
		}
	} else if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		return fmt.Errorf("inspect rules: %w", err)
	}
	if err := ws.RemoveAll(ctx, RulesDir); err != nil {
		return fmt.Errorf("reset rules: %w", err)
	}
	if strings.TrimSpace(system) != "" {
		body := "---\ndescription: Instructions for this assistant, set by its operator\nalwaysApply: true\n---\n\n" + system + "\n"
		if err := ws.WriteFile(ctx, path.Join(RulesDir, "system.mdc"), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write rules: %w", err)
		}
	}
	if len(list) > 0 {
		var sb strings.Builder
		sb.WriteString("---\ndescription: Agent Skills installed in this workspace\nalwaysApply: true\n---\n\n")
		sb.WriteString("These skills are installed under " + SkillsDir + "/. When a task matches a skill's description, read its SKILL.md first and follow it.\n\n")
		for _, s := range list {
			fmt.Fprintf(&sb, "- %s: %s (%s/%s/SKILL.md)\n", s.Name, oneLine(s.Description), SkillsDir, s.Name)
		}
		if err := ws.WriteFile(ctx, path.Join(RulesDir, "skills.mdc"), []byte(sb.String()), 0o644); err != nil {
			return fmt.Errorf("write rules: %w", err)
		}
	}
	return nil
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
