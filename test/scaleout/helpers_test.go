// Package scaleout runs two real `agentbox serve` processes on one
// PostgreSQL store and one data root (issue 22): a chat's turns alternate
// between them with its history, hook memory, workspace files and the
// CLI's session intact; concurrent turns of one chat through both run one
// at a time; a server killed mid-turn releases the chat at once. Sandboxed
// turns run the real Claude Code CLI in Docker against scripted models.
package scaleout

import (
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// newAppIn copies the example app (the sandboxed coder on the scripted
// connector demo.yaml) into parent ("": a temporary folder), with an
// app.jsonc that keeps the store in PostgreSQL ($ENV.DATABASE_URL), has
// sandboxJSONC as its sandbox block and appJSONC's fields, and script as
// the coder's model script.
func newAppIn(t testing.TB, parent, sandboxJSONC, appJSONC, script string) string {
	t.Helper()
	if parent == "" {
		parent = t.TempDir()
	}
	app := e2etest.CopyExampleApp(t, parent)
	cfg := `{"data_root": "./data", "sandbox": ` + sandboxJSONC + `, "store": {"driver": "postgres", "dsn": "$ENV.DATABASE_URL"}, ` + e2etest.AuthJSONC
	if appJSONC != "" {
		cfg += ", " + appJSONC
	}
	cfg += "}"
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), cfg)
	e2etest.Write(t, filepath.Join(app, "connectors", "scripted", "demo.yaml"), script)
	return app
}

// server is a running `agentbox serve`.
type server struct {
	*e2etest.Server
	name string
	// tmp is its TMPDIR (its bridge folders and pool slots).
	tmp string
}

// start runs `agentbox serve` on app with its store at dsn, named name in
// the logs, and waits until it answers. Cleanup stops it (SIGTERM, then
// SIGKILL).
func start(t testing.TB, name, app, dsn string, args ...string) *server {
	t.Helper()
	return startIn(t, e2etest.ShortDir(t), name, app, dsn, args...)
}

// startIn is start with tmp as the server's TMPDIR: a restarted server's
// is the one it had.
func startIn(t testing.TB, tmp, name, app, dsn string, args ...string) *server {
	t.Helper()
	testenv.Image(t)
	testenv.ClaudeBin(t)
	return &server{name: name, tmp: tmp, Server: e2etest.Serve(t, app, e2etest.Options{
		Name: name,
		Env:  append([]string{"TMPDIR=" + tmp, "DATABASE_URL=" + dsn}, e2etest.TokenEnv()...),
		Args: append([]string{"--runtime", "docker"}, args...),
	})}
}
