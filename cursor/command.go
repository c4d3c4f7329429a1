package cursor

import (
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/sandbox"
)

// modes maps the assistant's permission_mode to the CLI's --mode ("" is
// the default Agent mode, with full tool access). Claude's mode names that
// mean "work unattended" are accepted as Agent mode, so an assistant can
// switch its command between claude and cursor.
var modes = map[string]string{
	"":                  "",
	"default":           "",
	"agent":             "",
	"bypassPermissions": "",
	"acceptEdits":       "",
	"auto":              "",
	"dontAsk":           "",
	"plan":              "plan",
	"ask":               "ask",
}

// command is a built CLI invocation.
type command struct {
	argv []string
	env  map[string]string
}

// buildCommand assembles argv (no secrets) and the environment (secrets
// only here). Flags follow the CLI's parameter reference
// (https://cursor.com/docs/cli/reference/parameters).
func (e cli) buildCommand(req *executor.Request, p *prepared, mode, model string) *command {
	argv := []string{e.opts.Binary,
		"--print",
		"--output-format", "stream-json",
		"--stream-partial-output",
		// Print mode proposes file changes and denies commands unless
		// forced; inside the sandbox the agent works unattended.
		"--force",
		// Headless runs must not stop at the workspace trust prompt.
		"--trust",
		// The container is the sandbox; the CLI's own command sandbox
		// needs kernel features a container does not grant.
		"--sandbox", "disabled",
		"--workspace", sandbox.Workdir,
	}
	if model != "" {
		argv = append(argv, "--model", model)
	}
	if mode != "" {
		argv = append(argv, "--mode", mode)
	}
	if len(p.mcp.Servers) > 0 {
		// Headless runs cannot answer the MCP approval prompt.
		argv = append(argv, "--approve-mcps")
	}
	if p.resume != "" {
		argv = append(argv, "--resume", p.resume)
	}
	argv = append(argv, p.prompt)

	env := agentcli.GitEnv()
	for k, v := range e.opts.Env {
		env[k] = v
	}
	for k, v := range p.mcp.Env {
		env[k] = v
	}
	env["CURSOR_API_KEY"] = req.Connector.Key
	env["CURSOR_CONFIG_DIR"] = sandbox.Workdir + "/" + ConfigDir
	env["HOME"] = sandbox.Workdir + "/" + HomeDir
	// Never try to open a browser for a login nobody can complete.
	env["NO_OPEN_BROWSER"] = "1"
	return &command{argv: argv, env: env}
}
