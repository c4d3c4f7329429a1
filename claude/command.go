package claude

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/vision"
)

// Permission modes the CLI accepts (claude --help, 2.1.197).
var permissionModes = map[string]bool{
	"acceptEdits": true, "auto": true, "bypassPermissions": true,
	"default": true, "dontAsk": true, "plan": true,
}

// DefaultPermissionMode is used when the assistant sets none: the agent
// works unattended inside its own sandbox, where nobody can answer a
// permission prompt.
const DefaultPermissionMode = "bypassPermissions"

// envFilterScript runs the CLI with every inherited CLAUDECODE and
// CLAUDE_CODE_* variable removed (a parent Claude Code session, an
// operator's shell) except those the executor set itself, listed in
// AGENTBOX_KEEP_ENV. The CLI's argv follows as "$0" "$@".
const envFilterScript = `for v in $(env | sed -nE 's/^(CLAUDECODE|CLAUDE_CODE_[A-Za-z0-9_]*)=.*/\1/p'); do case " $AGENTBOX_KEEP_ENV " in *" $v "*) ;; *) unset "$v" ;; esac; done; unset AGENTBOX_KEEP_ENV; exec "$0" "$@"`

// command is a built CLI invocation.
type command struct {
	argv  []string
	env   map[string]string
	stdin []byte
}

// buildCommand assembles argv (no secrets), the environment (secrets
// only here) and the stdin stream.
func (e cli) buildCommand(req *executor.Request, p *prepared, maxTurns int, permMode, model string) (*command, error) {
	args := req.Arguments
	argv := []string{e.opts.Binary,
		"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--include-partial-messages",
		"--max-turns", strconv.Itoa(maxTurns),
		"--permission-mode", permMode,
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	if req.PermissionPromptTool != "" {
		argv = append(argv, "--permission-prompt-tool", req.PermissionPromptTool)
		if len(req.PermissionAsk) > 0 {
			b, err := json.Marshal(map[string]any{"permissions": map[string]any{"ask": req.PermissionAsk}})
			if err != nil {
				return nil, err
			}
			argv = append(argv, "--settings", string(b))
		}
	}
	switch {
	case p.resume:
		argv = append(argv, "--resume", p.sessionID)
	case p.forkOf != "":
		// The chat's session starts as a copy of the session it was
		// forked from, under the chat's own id.
		argv = append(argv, "--resume", p.forkOf, "--fork-session", "--session-id", p.sessionID)
	default:
		argv = append(argv, "--session-id", p.sessionID)
	}
	if p.promptFile {
		argv = append(argv, "--append-system-prompt-file", sandbox.Workdir+"/"+SystemPromptFile)
	}
	allowed := append(append([]string(nil), args.AllowedTools...), p.mcp.Allowed...)
	if req.PermissionPromptTool != "" {
		// The CLI would run an allowed tool without asking: the approval
		// policy, asked through the prompt tool, is what allows.
		allowed = nil
	}
	if len(allowed) > 0 {
		// One comma-separated value: the flag is variadic, and a value
		// after it must not swallow the next flag's position.
		argv = append(argv, "--allowedTools", strings.Join(dedupe(allowed), ","))
	}
	if len(args.DisallowedTools) > 0 {
		argv = append(argv, "--disallowedTools", strings.Join(dedupe(args.DisallowedTools), ","))
	}
	argv = append(argv, "--mcp-config", sandbox.Workdir+"/"+p.paths.MCPConfig, "--strict-mcp-config")
	// Settings come from the user level only: the config dir, which holds
	// nothing but what prepare put there. Project and local settings
	// (hooks, env, permissions) in the workspace are not read.
	argv = append(argv, "--setting-sources", "user")

	env := agentcli.GitEnv()
	for k, v := range e.opts.Env {
		if isClaudeInternal(k) {
			continue
		}
		env[k] = v
	}
	for k, v := range p.mcp.Env {
		env[k] = v
	}
	c := req.Connector
	if c.Host != "" {
		env["ANTHROPIC_BASE_URL"] = c.Host
	}
	if c.Key != "" {
		if bearerConnector(c.Type) {
			env["ANTHROPIC_AUTH_TOKEN"] = c.Key
		} else {
			env["ANTHROPIC_API_KEY"] = c.Key
		}
	}
	if model != "" {
		env["ANTHROPIC_MODEL"] = model
		// Background calls (titles, summaries) use the "small fast" model;
		// a gateway behind the connector may only know this one.
		env["ANTHROPIC_SMALL_FAST_MODEL"] = model
		env["ANTHROPIC_DEFAULT_HAIKU_MODEL"] = model
	}
	env["CLAUDE_CONFIG_DIR"] = sandbox.Workdir + "/" + p.paths.Config
	// Memory files (CLAUDE.md in the workspace, its parents or the config
	// dir) and auto memory are not the assistant's definition: off.
	env["CLAUDE_CODE_DISABLE_CLAUDE_MDS"] = "1"
	env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] = "1"
	env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	// CLAUDE_CODE_SUBPROCESS_ENV_SCRUB is deliberately not set: in 2.1.197
	// it forces the permission mode to "default" and makes Bash require the
	// CLI's own bubblewrap+socat sandbox, so no tool could run unattended
	// inside our container. The env filter removes it when inherited.
	if e.opts.APIRetries > 0 {
		env["CLAUDE_CODE_MAX_RETRIES"] = strconv.Itoa(e.opts.APIRetries)
	}
	env["DISABLE_AUTOUPDATER"] = "1"
	env["DISABLE_TELEMETRY"] = "1"
	env["DISABLE_ERROR_REPORTING"] = "1"
	// The CLI starts a turn without waiting for its MCP servers (2.1.197
	// connects them in the background unless MCP_CONNECTION_NONBLOCKING is
	// off, and then waits only MCP_CONNECT_TIMEOUT_MS, 5s by default): the
	// tools of a server still starting are missing from the session and
	// the model's calls get "No such tool available ... still connecting".
	// A node or npx server, or the bridge's relay, takes longer than that
	// on a busy host. The turn waits until each server connected or failed
	// (the CLI gives up on one after MCP_TIMEOUT, 30s by default), unless
	// the operator's Env says otherwise.
	for k, v := range map[string]string{"MCP_CONNECTION_NONBLOCKING": "0", "MCP_CONNECT_TIMEOUT_MS": mcpConnectWait} {
		if _, set := env[k]; !set {
			env[k] = v
		}
	}
	if permMode == "bypassPermissions" {
		// The CLI refuses to bypass permissions as root unless told it is
		// in a sandbox.
		env["IS_SANDBOX"] = "1"
	}
	keep := []string{}
	for k := range env {
		if isClaudeInternal(k) {
			keep = append(keep, k)
		}
	}
	sort.Strings(keep)
	env["AGENTBOX_KEEP_ENV"] = strings.Join(keep, " ")

	stdin, err := inputLines(req.Input, req.Vision)
	if err != nil {
		return nil, err
	}
	if !e.opts.NoEnvFilter {
		argv = append([]string{"/bin/sh", "-c", envFilterScript}, argv...)
	}
	return &command{argv: argv, env: env, stdin: stdin}, nil
}

// mcpConnectWait is the CLI's MCP_CONNECT_TIMEOUT_MS: beyond its own
// MCP_TIMEOUT, so that it waits for each server to connect or fail.
const mcpConnectWait = "60000"

// isClaudeInternal reports the variables a parent Claude Code sets or
// reads to steer a nested one.
func isClaudeInternal(k string) bool {
	return k == "CLAUDECODE" || strings.HasPrefix(k, "CLAUDE_CODE_")
}

// bearerConnector reports connectors whose key is a bearer token
// (Authorization header) rather than an Anthropic x-api-key: everything
// but the native anthropic type (gateways, Anthropic-compatible APIs).
func bearerConnector(typ string) bool {
	switch strings.ToLower(typ) {
	case "", "anthropic", "claude":
		return false
	}
	return true
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	out := in[:0:0]
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// inputLines encodes the turn's new messages as one stream-json user line
// (several lines would make the CLI answer each separately). Messages from
// other roles are labelled in the text. withImages (the model takes
// images) adds those of the last user message as image blocks.
func inputLines(input []chat.Message, withImages bool) ([]byte, error) {
	if len(input) == 0 {
		return nil, fmt.Errorf("no input message: a turn needs at least one user message")
	}
	type message struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	type line struct {
		Type    string  `json:"type"`
		Message message `json:"message"`
	}
	blocks := make([]map[string]any, 0, len(input))
	for _, m := range input {
		t := m.Content
		if m.Role != "" && m.Role != chat.RoleUser {
			t = "[" + m.Role + "]: " + t
		}
		blocks = append(blocks, map[string]any{"type": "text", "text": t})
	}
	var images []vision.Image
	if withImages {
		var err error
		if images, err = vision.ForCLI(input); err != nil {
			return nil, fmt.Errorf("the input's images: %w", err)
		}
	}
	// The images of the last user message follow the text as base64 image
	// blocks, resized as Yao's Claude runner sends them.
	for _, im := range images {
		blocks = append(blocks, map[string]any{"type": "image", "source": map[string]any{
			"type": "base64", "media_type": im.MediaType, "data": base64.StdEncoding.EncodeToString(im.Data)}})
	}
	var content any = blocks
	if len(blocks) == 1 {
		content = blocks[0]["text"]
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(line{Type: "user", Message: message{Role: chat.RoleUser, Content: content}}); err != nil {
		return nil, fmt.Errorf("encode input: %w", err)
	}
	return buf.Bytes(), nil
}
