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
	// What the pipeline gives: a stdio server's credential as its
	// placeholder, a remote server without headers (its credentials stay
	// with the bridge's host relay).
	a := &assistant.Assistant{
		MCP: []assistant.MCPRef{{ServerID: "web"}, {ServerID: "gh", Tools: []string{"list_issues"}}},
		MCPServers: map[string]*assistant.MCPServer{
			"gh":  {Command: "gh-mcp", Args: []string{"--stdio"}, Env: map[string]string{"TOKEN": "agentbox-placeholder-GH-1", "my.flag": "on"}},
			"web": {URL: "https://mcp.example.com/mcp"},
		},
	}
	extra := map[string]assistant.MCPServer{"zz-host": {Command: "agentbox", Args: []string{"bridge"}}, "a-sse": {Transport: "sse", URL: "http://127.0.0.1:9/sse"}}
	format := agentcli.MCPFormat{Reference: func(n string) string { return "%" + n + "%" }}
	cfg, err := agentcli.ResolveMCP(a, extra, format, "/relay", nil)
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
		!reflect.DeepEqual(gh.Tools, []string{"list_issues"}) || gh.Extra || gh.Command != "gh-mcp" || !gh.Filtered {
		t.Errorf("gh %+v", gh)
	}
	if web := cfg.Servers[0]; web.URL != "https://mcp.example.com/mcp" {
		t.Errorf("web %+v", web)
	}
	if !cfg.Servers[3].Extra || cfg.Servers[3].Tools != nil {
		t.Errorf("extra %+v", cfg.Servers[3])
	}
	want := map[string]string{"AGENTBOX_MCP_GH_ENV_TOKEN": "agentbox-placeholder-GH-1", "AGENTBOX_MCP_GH_ENV_MY_FLAG": "on"}
	if !reflect.DeepEqual(cfg.Env, want) {
		t.Errorf("env %v", cfg.Env)
	}
	for _, typed := range []bool{false, true} {
		format.Type = typed
		cfg, err := agentcli.ResolveMCP(a, extra, format, "/relay", nil)
		if err != nil {
			t.Fatal(err)
		}
		file := cfg.File
		want := "{\n  \"mcpServers\": {\n    \"a-sse\": {\n      \"url\": \"http://127.0.0.1:9/sse\"\n    },"
		if typed {
			want = "{\n  \"mcpServers\": {\n    \"a-sse\": {\n      \"type\": \"sse\",\n      \"url\": \"http://127.0.0.1:9/sse\"\n    },"
		}
		if !strings.HasPrefix(string(file), want) || !strings.HasSuffix(string(file), "}\n}\n") ||
			strings.Contains(string(file), "agentbox-placeholder-GH-1") || !strings.Contains(string(file), `"TOKEN": "%AGENTBOX_MCP_GH_ENV_TOKEN%"`) {
			t.Errorf("file %s", file)
		}
	}
	// A stdio server whose reference lists tools runs behind the filter,
	// with its env.
	format.Type = true
	var file struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(cfg.File, &file); err != nil {
		t.Fatal(err)
	}
	if ghE := file.MCPServers["gh"]; ghE.Command != "/relay" || strings.Join(ghE.Args, " ") != "bridge mcp-filter --allow list_issues -- gh-mcp --stdio" ||
		ghE.Env["TOKEN"] != "%AGENTBOX_MCP_GH_ENV_TOKEN%" {
		t.Errorf("filtered stdio server %+v", ghE)
	}
	// The egress proxy's variables reach every stdio server (by
	// reference), but not over one it sets itself.
	a.MCPServers["gh"].Env["HTTPS_PROXY"] = "http://mine"
	pass := map[string]string{"HTTPS_PROXY": "HTTPS_PROXY", "NODE_EXTRA_CA_CERTS": "AGENTBOX_EGRESS_CA"}
	pc, err := agentcli.ResolveMCP(a, extra, format, "/relay", pass)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pc.Servers {
		switch s.Name {
		case "gh":
			if s.Env["NODE_EXTRA_CA_CERTS"] != "%AGENTBOX_EGRESS_CA%" || s.Env["HTTPS_PROXY"] != "%AGENTBOX_MCP_GH_ENV_HTTPS_PROXY%" {
				t.Errorf("gh env %v", s.Env)
			}
		case "zz-host":
			if s.Env["HTTPS_PROXY"] != "%HTTPS_PROXY%" {
				t.Errorf("zz-host env %v", s.Env)
			}
		default:
			if len(s.Env) != 0 {
				t.Errorf("remote server %s env %v", s.Name, s.Env)
			}
		}
	}
	if none, err := agentcli.ResolveMCP(nil, nil, format, "", nil); err != nil || none.Names() != nil || len(none.Env) != 0 ||
		string(none.File) != "{\n  \"mcpServers\": {}\n}\n" {
		t.Errorf("no servers: %+v, %v", none, err)
	}
}

func TestResolveMCPErrors(t *testing.T) {
	t.Parallel()
	format := agentcli.MCPFormat{Reference: func(n string) string { return n }}
	one := func(id string, s *assistant.MCPServer, tools ...string) *assistant.Assistant {
		return &assistant.Assistant{MCP: []assistant.MCPRef{{ServerID: id, Tools: tools}}, MCPServers: map[string]*assistant.MCPServer{id: s}}
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
		{"credential in env", one("x", &assistant.MCPServer{Command: "c", Env: map[string]string{"K": "$ENV.GH_TOKEN"}}), nil, "/relay",
			`"x": env K reads $ENV.GH_TOKEN, a credential, which the sandbox must not hold`},
		{"remote server's headers", one("x", &assistant.MCPServer{URL: "https://h/mcp", Headers: map[string]string{"Authorization": "Bearer t"}}), nil, "/relay",
			`"x": its headers and its tool list are kept by the bridge's host relay`},
		{"remote server's tool list", one("x", &assistant.MCPServer{URL: "https://h/mcp"}, "a"), nil, "/relay", "kept by the bridge's host relay"},
		{"collision", one("x", &assistant.MCPServer{Command: "c", Env: map[string]string{"a-b": "1", "a.b": "2"}}), nil, "/relay", "collides with another setting after name normalization"},
		{"twice", one("x", &assistant.MCPServer{Command: "c"}), map[string]assistant.MCPServer{"x": {Command: "d"}}, "/relay", `mcp server "x" configured twice`},
		{"empty name", nil, map[string]assistant.MCPServer{"": {Command: "d"}}, "", "mcp server with an empty name"},
		{"tools without a relay", one("x", &assistant.MCPServer{Command: "c"}, "a"), nil, "",
			`mcp server "x" lists its tools (a), which only the agentbox MCP filter enforces`},
	}
	for _, tc := range tests {
		if _, err := agentcli.ResolveMCP(tc.a, tc.extra, format, tc.relay, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
