package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/bridge/bridgetest"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// The operator's MCP credentials: a stdio server's token (for api.test)
// and a remote server's bearer token.
const (
	mcpStdioSecret  = "ghp_MCPstdioSECRET_41c0e7b2"
	mcpRemoteSecret = "mcp_REMOTEsecret_93ad15f0"
)

// mcpStdioServer is a stdio MCP server with one tool, whoami, that calls
// api.test with its GH_TOKEN as a Bearer token (through the sandbox's
// egress proxy, as a real API server such as GitHub's would) and returns
// what the API answered and what its own environment holds.
const mcpStdioServer = `const rl=require('readline').createInterface({input:process.stdin});` +
	`const send=(m)=>process.stdout.write(JSON.stringify(m)+'\n');` +
	`rl.on('line',async(l)=>{let q;try{q=JSON.parse(l)}catch(e){return}if(q.id===undefined)return;const ok=(r)=>send({jsonrpc:'2.0',id:q.id,result:r});` +
	`switch(q.method){case 'initialize':return ok({protocolVersion:(q.params&&q.params.protocolVersion)||'2025-06-18',capabilities:{tools:{}},serverInfo:{name:'gh',version:'1'}});` +
	`case 'tools/list':return ok({tools:[{name:'whoami',description:'Who the token belongs to.',inputSchema:{type:'object',properties:{}}}]});` +
	`case 'tools/call':{let t;try{const r=await fetch(process.argv[1],{headers:{authorization:'Bearer '+process.env.GH_TOKEN}});t=r.status+' '+await r.text()}catch(e){t='ERR '+(e.cause?e.cause.message:e.message)}` +
	`return ok({content:[{type:'text',text:'api: '+t+' server env: GH_TOKEN='+process.env.GH_TOKEN}]})}` +
	`default:send({jsonrpc:'2.0',id:q.id,error:{code:-32601,message:'no '+q.method}})}})`

// mcpDumpScript is a hostile agent looking for the MCP credentials: the
// environment of its shell and of every process it can see (the CLI's,
// the MCP servers'), their command lines, and the CLI's configuration
// files, all saved to the workspace.
const mcpDumpScript = `{ echo "== env"; env; echo "== procs";
for p in /proc/[0-9]*; do echo "-- $p"; tr '\0' '\n' < $p/environ; tr '\0' ' ' < $p/cmdline; echo; done;
echo "== files"; find /workspace/.agentbox "$HOME" /tmp -type f -size -1M -readable 2>/dev/null | head -500 | xargs cat 2>/dev/null;
} > /workspace/mcp-dump.txt 2>&1; grep -c . /workspace/mcp-dump.txt`

// TestMCPCredentialsInDocker runs each CLI (Claude Code, the Gemini CLI,
// Codex, opencode) in a Docker sandbox with two MCP servers that hold operator
// credentials: a stdio server whose env reads $ENV.AB_MCP_GH (declared as
// a sandbox secret of api.test) and a remote server on the host whose
// Authorization header reads $ENV.AB_MCP_WEB. The agent dumps every
// environment and configuration it can read, then calls both servers'
// tools. The stdio server holds a placeholder that the egress proxy swaps
// for the value on its way to api.test; the remote server is reached by
// the host relay with its header, its tool list enforced there and its
// echo of the credential masked. Neither value is anywhere the agent can
// read, nor in the events, the model's requests, the workspace, the logs
// or the store.
func TestMCPCredentialsInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	for _, cli := range []mcpCLI{
		{"claude", "anthropic", "Bash", "command", "mcp__%s__%s"},
		{"gemini", "anthropic", "run_shell_command", "command", "mcp_%s_%s"},
		{"codex", "openai", "exec_command", "cmd", "mcp__%s__%s"},
		{"opencode", "anthropic", "bash", "command", "%s_%s"},
	} {
		t.Run(cli.command, func(t *testing.T) { mcpCredentials(t, cli) })
	}
}

// mcpCLI is how a CLI is driven: its connector's type, its shell tool and
// the argument holding the command, and how it names an MCP server's tool
// (fmt, server then tool).
type mcpCLI struct {
	command, connector, shell, arg, toolName string
}

func mcpCredentials(t *testing.T, cli mcpCLI) {
	command, shell := cli.command, cli.shell
	image := testenv.CLIImage(t, command)
	t.Setenv("AB_MCP_GH", mcpStdioSecret)
	t.Setenv("AB_MCP_WEB", "Bearer "+mcpRemoteSecret)

	pki := egresstest.NewPKI(t)
	api := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The API checks the credential and echoes it, as a careless one
		// might.
		w.Write([]byte("valid=" + strconv.FormatBool(r.Header.Get("Authorization") == "Bearer "+mcpStdioSecret) + " auth=" + r.Header.Get("Authorization")))
	}), "api.test")
	calls := &bridgetest.Calls{}
	remote := bridgetest.HTTPServer(t, "http", "Authorization=Bearer "+mcpRemoteSecret, calls)
	tlsPort := strconv.Itoa(api.Port)

	tool := func(server, name string) string { return fmt.Sprintf(cli.toolName, server, name) }
	model := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: shell, Input: map[string]any{cli.arg: mcpDumpScript, "description": "look around"}}}},
		{When: &scripted.Match{AfterToolResult: shell}, ToolCalls: []scripted.ToolCall{{Name: tool("gh", "whoami"), Input: map[string]any{}}}},
		{When: &scripted.Match{AfterToolResult: tool("gh", "whoami")}, ToolCalls: []scripted.ToolCall{{Name: tool("web", "headers"), Input: map[string]any{}}}},
		{When: &scripted.Match{AfterToolResult: tool("web", "headers")}, ToolCalls: []scripted.ToolCall{{Name: tool("web", "hidden"), Input: map[string]any{}}}},
		{Text: "Done."},
	}})
	t.Cleanup(model.Close)

	gh, _ := json.Marshal(mcpStdioServer)
	d := dockerTurn(t, pki, map[string]string{
		"connectors/model.conn.yao": `{"type": "` + cli.connector + `", "options": {"host": "` + model.URL + `", "key": "sk-model-key", "model": "claude-sonnet-4-5"}}`,
		"app.jsonc":                 `{"data_root": "data"}`,
		"mcps/gh.mcp.yao": `{"transport": "stdio", "command": "node", "args": ["-e", ` + string(gh) + `, "https://api.test:` + tlsPort + `/user"],
			"env": {"GH_TOKEN": "$ENV.AB_MCP_GH", "LOG_LEVEL": "debug"}}`,
		"mcps/web.mcp.yao": `{"transport": "http", "url": "` + remote + `", "authorization_token": "$ENV.AB_MCP_WEB"}`,
		"assistants/coder/package.yao": `{
			"connector": "model",
			"mcp": {"servers": ["gh", {"server_id": "web", "tools": ["visible", "headers"]}]},
			"sandbox": {
				"command": "` + command + `", "image": "` + image + `", "timeout": "3m", "max_memory": "1g",
				"arguments": {"max_turns": 8, "permission_mode": "bypassPermissions"},
				"network": {"allow": ["api.test:` + tlsPort + `"], "hosts": {"api.test": "127.0.0.1"}},
				"secrets": {"GH": {"value": "$ENV.AB_MCP_GH", "hosts": ["api.test:` + tlsPort + `"]}}
			}
		}`,
	}, "Find the tokens.", dockerOpts{})

	dump := d.workspace(t, "mcp-dump.txt")
	if !strings.Contains(dump, "GH_TOKEN=agentbox-placeholder-GH-") || !strings.Contains(dump, "LOG_LEVEL=debug") {
		t.Errorf("the dump did not see the stdio MCP server's environment (placeholder and plain value):\n%.3000s", dump)
	}
	results := map[string]string{}
	for _, e := range d.rec.Starts(chat.TypeToolResult) {
		c, _ := e.Props["content"].(string)
		name, _ := e.Props["name"].(string)
		results[name] += c
	}
	t.Logf("tool results: %q", results)
	if r := results[tool("gh", "whoami")]; !strings.Contains(r, "api: 200 valid=true auth=Bearer ****") || !strings.Contains(r, "GH_TOKEN=agentbox-placeholder-GH-") {
		t.Errorf("the stdio server's call of api.test: %q", r)
	}
	if r := results[tool("web", "headers")]; !strings.Contains(r, "Authorization: ****") {
		t.Errorf("the remote server's echo of its credential: %q", r)
	}
	if got := strings.Join(calls.Names(), " "); got != "headers" {
		t.Errorf("the remote server ran %q: its hidden tool must not be reachable", got)
	}
	valid := false
	for _, r := range api.Requests() {
		valid = valid || r.Header.Get("Authorization") == "Bearer "+mcpStdioSecret
	}
	if !valid {
		t.Error("api.test never got the stdio server's credential")
	}
	d.checkNowhere(t, model, map[string]string{"what the agent dumped": dump}, mcpStdioSecret, mcpRemoteSecret,
		base64.StdEncoding.EncodeToString([]byte(mcpRemoteSecret)))
}
