package assistant

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestLoadPorts: the three shapes of declared ports load into one list:
// agentbox's sandbox.ports, Yao v2's computer.ports (numbers or objects)
// and Yao's services.
func TestLoadPorts(t *testing.T) {
	t.Parallel()
	dir := writeApp(t, map[string]string{
		"connectors/claude.conn.yao": claudeConn,
		"assistants/v1/package.yao": `{"connector": "claude", "prompts": [{"role": "system", "content": "x"}],
  "sandbox": {"command": "claude", "keep_alive": "5m", "ports": [3000, {"port": 8080, "label": "api"}],
    "services": [{"name": "docs", "port": 9000, "protocol": "http"}]}}`,
		"assistants/v2/package.yao": `{"connector": "claude", "prompts": [{"role": "system", "content": "x"}], "sandbox": {"version": "2.0",
  "runner": {"name": "claude"}, "computer": {"ports": [{"port": 5173, "label": "vite", "host_port": 15173, "protocol": "tcp"}]}}}`,
		"assistants/v2n/package.yao": `{"connector": "claude", "prompts": [{"role": "system", "content": "x"}], "sandbox": {"version": "2.0",
  "runner": {"name": "claude"}, "computer": {"ports": [3000, 8080]}}}`,
	})
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][]Port{
		"v1":  {{Port: 3000}, {Port: 8080, Label: "api"}, {Port: 9000, Label: "docs"}},
		"v2":  {{Port: 5173, Label: "vite"}},
		"v2n": {{Port: 3000}, {Port: 8080}},
	} {
		if got := app.Assistants[id].Sandbox.Ports; !slices.Equal(got, want) {
			t.Errorf("%s: ports %+v, want %+v", id, got, want)
		}
	}
	var warned bool
	for _, w := range app.Warnings {
		if strings.Contains(w.String(), "host_port") {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning that host_port is not applied: %v", app.Warnings)
	}
}

func TestLoadPortsProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ ports, want string }{
		{`[0]`, "want a port from 1 to 65535"},
		{`[70000]`, "want a port from 1 to 65535"},
		{`[80.5]`, "want a port from 1 to 65535"},
		{`["80"]`, "want a port number or {port, label}"},
		{`[3000, {"port": 3000}]`, "declared twice"},
		{`[41880]`, "the sandbox's own"},
		{`[{"port": 80, "protocol": "udp"}]`, "previews carry HTTP and WebSocket"},
		{`[{"port": 80, "path": "/"}]`, `unknown field "path"`},
		{`[{"label": "x"}]`, "want a port from 1 to 65535"},
	} {
		dir := writeApp(t, map[string]string{
			"connectors/claude.conn.yao": claudeConn,
			"assistants/a/package.yao": `{"connector": "claude", "prompts": [{"role": "system", "content": "x"}],
  "sandbox": {"command": "claude", "ports": ` + tc.ports + `}}`,
		})
		_, err := Load(filepath.Clean(dir))
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "sandbox.ports[") {
			t.Errorf("ports %s: %v, want a problem at sandbox.ports[...] saying %q", tc.ports, err, tc.want)
		}
	}
}
