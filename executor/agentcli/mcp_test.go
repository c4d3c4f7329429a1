package agentcli_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/executor/agentcli"
)

func TestResolveMCP(t *testing.T) {
	t.Parallel()
	a := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "web"}, {ServerID: "gh", Tools: []string{"list_issues"}}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"TOKEN": "$ENV.GH", "my.flag": "on"}},
			"web": {URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		},
	}
	extra := map[string]assistant.MCPServer{"zz-host": {Command: "agentbox", Args: []string{"bridge"}}, "a-sse": {Transport: "sse", URL: "http://127.0.0.1:9/sse"}}
	lookup := func(k string) (string, bool) { return "ghp_X", k == "GH" }
	format := agentcli.MCPFormat{Reference: func(n string) string { return "%" + n + "%" }}
	cfg, err := agentcli.ResolveMCP(a, extra, lookup, format, "/relay")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, s := range cfg.Servers {
		order = append(order, s.Name+":"+s.Transport)
	}
	if want := []string{"web:http", "gh:stdio", "a-sse:sse", "zz-host:stdio"}; !reflect.DeepEqual(order, want) {
		t.Errorf("servers %v, want %v", order, want)
	}
	if want := []string{"a-sse", "gh", "web", "zz-host"}; !reflect.DeepEqual(cfg.Names(), want) {
		t.Errorf("names %v", cfg.Names())
	}
	gh := cfg.Servers[1]
	if gh.Env["TOKEN"] != "%AGENTBOX_MCP_GH_ENV_TOKEN%" || gh.Env["my.flag"] != "%AGENTBOX_MCP_GH_ENV_MY_FLAG%" ||
		!reflect.DeepEqual(gh.Tools, []string{"list_issues"}) || gh.Extra || gh.Command != "gh-mcp" {
		t.Errorf("gh %+v", gh)
	}
	if web := cfg.Servers[0]; web.Headers["Authorization"] != "%AGENTBOX_MCP_WEB_HDR_AUTHORIZATION%" || web.URL == "" {
		t.Errorf("web %+v", web)
	}
	if !cfg.Servers[3].Extra || cfg.Servers[3].Tools != nil {
		t.Errorf("extra %+v", cfg.Servers[3])
	}
	want := map[string]string{"AGENTBOX_MCP_GH_ENV_TOKEN": "ghp_X", "AGENTBOX_MCP_GH_ENV_MY_FLAG": "on", "AGENTBOX_MCP_WEB_HDR_AUTHORIZATION": "Bearer s3cret"}
	if !reflect.DeepEqual(cfg.Env, want) {
		t.Errorf("env %v", cfg.Env)
	}
	for _, typed := range []bool{false, true} {
		format.Type = typed
		cfg, err := agentcli.ResolveMCP(a, extra, lookup, format, "/relay")
		if err != nil {
			t.Fatal(err)
		}
		file := cfg.File
		want := "{\n  \"mcpServers\": {\n    \"a-sse\": {\n      \"url\": \"http://127.0.0.1:9/sse\"\n    },"
		if typed {
			want = "{\n  \"mcpServers\": {\n    \"a-sse\": {\n      \"type\": \"sse\",\n      \"url\": \"http://127.0.0.1:9/sse\"\n    },"
		}
		if err != nil || !strings.HasPrefix(string(file), want) || !strings.HasSuffix(string(file), "}\n}\n") ||
			strings.Contains(string(file), "ghp_X") || !strings.Contains(string(file), `"TOKEN": "%AGENTBOX_MCP_GH_ENV_TOKEN%"`) {
			t.Errorf("file %s, %v", file, err)
		}
	}
	// A server whose reference lists tools runs behind the filter, the
	// values of its headers in the filter's environment.
	f := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "gh", Tools: []string{"list_issues", "get_issue"}}, {ServerID: "web", Tools: []string{"search"}}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"TOKEN": "t0ken"}},
			"web": {Transport: "sse", URL: "https://mcp.example.com/sse", Headers: map[string]string{"Authorization": "Bearer s3cret"}},
		},
	}
	format.Type = true
	fc, err := agentcli.ResolveMCP(f, nil, lookup, format, "/relay")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
			URL     string            `json:"url"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(fc.File, &file); err != nil {
		t.Fatal(err)
	}
	ghE, webE := file.MCPServers["gh"], file.MCPServers["web"]
	if ghE.Type != "stdio" || ghE.Command != "/relay" || strings.Join(ghE.Args, " ") != "bridge mcp-filter --allow list_issues,get_issue --transport stdio -- gh-mcp --stdio" ||
		ghE.Env["TOKEN"] != "%AGENTBOX_MCP_GH_ENV_TOKEN%" || !fc.Servers[0].Filtered {
		t.Errorf("filtered stdio server %+v", ghE)
	}
	if webE.Type != "stdio" || webE.Command != "/relay" || webE.URL != "" ||
		strings.Join(webE.Args, " ") != "bridge mcp-filter --allow search --transport sse --url https://mcp.example.com/sse --header Authorization=AGENTBOX_MCP_WEB_HDR_AUTHORIZATION" ||
		webE.Env["AGENTBOX_MCP_WEB_HDR_AUTHORIZATION"] != "%AGENTBOX_MCP_WEB_HDR_AUTHORIZATION%" || strings.Contains(string(fc.File), "s3cret") {
		t.Errorf("filtered sse server %+v", webE)
	}
	if none, err := agentcli.ResolveMCP(nil, nil, lookup, format, ""); err != nil || none.Names() != nil || len(none.Env) != 0 ||
		string(none.File) != "{\n  \"mcpServers\": {}\n}\n" {
		t.Errorf("no servers: %+v, %v", none, err)
	}
}

func TestResolveMCPErrors(t *testing.T) {
	t.Parallel()
	lookup := func(string) (string, bool) { return "", false }
	format := agentcli.MCPFormat{Reference: func(n string) string { return n }}
	one := func(id string, s *assistant.MCPServer) *assistant.Assistant {
		return &assistant.Assistant{MCP: []assistant.MCPRef{{ServerID: id}}, MCPServers: map[string]*assistant.MCPServer{id: s}}
	}
	tests := []struct {
		name  string
		a     *assistant.Assistant
		extra map[string]assistant.MCPServer
		relay string
		want  string
	}{
		{"no definition", &assistant.Assistant{MCP: []assistant.MCPRef{{ServerID: "missing"}}}, nil, "/relay", `mcp server "missing": no definition in mcps/`},
		{"stdio without command", one("x", &assistant.MCPServer{Transport: "stdio"}), nil, "/relay", `"x": stdio server without a command`},
		{"sse without url", one("x", &assistant.MCPServer{Transport: "sse"}), nil, "/relay", `"x": sse server without a url`},
		{"unknown transport", one("x", &assistant.MCPServer{Transport: "ws", URL: "ws://h"}), nil, "/relay", `unknown transport "ws" (want stdio, http or sse)`},
		{"unset variable", one("x", &assistant.MCPServer{Command: "c", Env: map[string]string{"K": "$ENV.NOPE"}}), nil, "/relay", `"x": env K: environment variable NOPE is not set`},
		{"collision", one("x", &assistant.MCPServer{Command: "c", Headers: map[string]string{"a-b": "1", "a.b": "2"}}), nil, "/relay", "collides with another setting after name normalization"},
		{"twice", one("x", &assistant.MCPServer{Command: "c"}), map[string]assistant.MCPServer{"x": {Command: "d"}}, "/relay", `mcp server "x" configured twice`},
		{"empty name", nil, map[string]assistant.MCPServer{"": {Command: "d"}}, "", "mcp server with an empty name"},
		{"tools without a relay", &assistant.Assistant{MCP: []assistant.MCPRef{{ServerID: "x", Tools: []string{"a"}}}, MCPServers: map[string]*assistant.MCPServer{"x": {Command: "c"}}}, nil, "",
			`mcp server "x" lists its tools (a), which only the agentbox MCP filter enforces`},
	}
	for _, tc := range tests {
		if _, err := agentcli.ResolveMCP(tc.a, tc.extra, lookup, format, tc.relay); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
