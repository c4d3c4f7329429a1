package assistant

import (
	"strings"
	"testing"
)

// TestIsolation: an assistant's sandbox.isolation wins over app.jsonc's,
// which wins over runc (""); the v2 form takes it too.
func TestIsolation(t *testing.T) {
	t.Parallel()
	dir := writeApp(t, map[string]string{
		"connectors/claude.conn.yao":      claudeConn,
		"app.jsonc":                       `{"sandbox": {"isolation": "gvisor"}}`,
		"assistants/inherits/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"}}`,
		"assistants/own/package.yao":      `{"connector": "claude", "sandbox": {"command": "claude", "isolation": "runc"}}`,
		"assistants/kata/package.yao":     `{"connector": "claude", "sandbox": {"command": "claude", "runtime": "kubernetes", "isolation": "kata"}}`,
		"assistants/v2/package.yao":       `{"connector": "claude", "sandbox": {"version": "2.0", "runner": {"name": "claude"}, "isolation": "runc"}}`,
	})
	app, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"inherits": "gvisor", "own": "runc", "kata": "kata", "v2": "runc"} {
		if got := app.Assistants[id].Sandbox.Isolation; got != want {
			t.Errorf("%s: isolation %q, want %q", id, got, want)
		}
	}
	if app.Config.Sandbox.Isolation != "gvisor" {
		t.Errorf("app default %q, want gvisor", app.Config.Sandbox.Isolation)
	}
	app, err = Load(writeApp(t, map[string]string{
		"connectors/claude.conn.yao":   claudeConn,
		"assistants/plain/package.yao": `{"connector": "claude", "sandbox": {"command": "claude"}}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := app.Assistants["plain"].Sandbox.Isolation; got != "" {
		t.Errorf("without isolation anywhere: %q, want \"\" (runc)", got)
	}
}

// TestIsolationProblems: an unknown level, and a level the assistant's
// runtime cannot give (local: the host's kernel; docker: no Kata), are
// positioned load errors; so is app.jsonc's default on an assistant whose
// runtime cannot give it.
func TestIsolationProblems(t *testing.T) {
	t.Parallel()
	_, err := Load(writeApp(t, map[string]string{
		"connectors/claude.conn.yao":    claudeConn,
		"app.jsonc":                     `{"sandbox": {"runtime": "docker", "isolation": "kata"}}`,
		"assistants/vm/package.yao":     `{"connector": "claude", "sandbox": {"command": "claude", "isolation": "vm"}}`,
		"assistants/local/package.yao":  `{"connector": "claude", "sandbox": {"command": "claude", "runtime": "local", "isolation": "gvisor"}}`,
		"assistants/number/package.yao": `{"connector": "claude", "sandbox": {"command": "claude", "isolation": 2}}`,
	}))
	if err == nil {
		t.Fatal("loaded")
	}
	if n := strings.Count(err.Error(), "isolation"); n != 4 {
		t.Errorf("%d problems name the isolation, want 4 (app.jsonc's wrong default is not repeated per assistant):\n%v", n, err)
	}
	for _, want := range []string{
		`app.jsonc:1:48: sandbox.isolation "kata": the docker runtime offers runc and gvisor; Kata runs on the kubernetes runtime`,
		`assistants/vm/package.yao:1:71: sandbox.isolation: want gvisor, kata, runc, got "vm"`,
		`assistants/local/package.yao:1:91: sandbox.isolation "gvisor": the local runtime (bubblewrap) runs on the host's kernel`,
		`assistants/number/package.yao:1:71: sandbox.isolation: want a string, got a number`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("problems lack %q:\n%v", want, err)
		}
	}

	_, err = Load(writeApp(t, map[string]string{
		"connectors/claude.conn.yao":   claudeConn,
		"app.jsonc":                    `{"sandbox": {"isolation": "gvisor"}}`,
		"assistants/local/package.yao": `{"connector": "claude", "sandbox": {"command": "claude", "runtime": "local"}}`,
	}))
	if want := `assistants/local/package.yao:1:69: app.jsonc's sandbox.isolation "gvisor": the local runtime (bubblewrap) runs on the host's kernel`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("problems %v, want %q", err, want)
	}
}
