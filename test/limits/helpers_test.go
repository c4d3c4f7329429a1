// Package limits attacks a real `agentbox serve` the way a hostile agent
// or a heavy user would (issue 17): a turn that never ends and a shutdown,
// a server killed mid-turn and the one started after it, one token opening
// many sandboxes, concurrent turns on one chat, an upstream that keeps
// failing, and a chat id reused with another assistant. Sandboxed turns run
// the real Claude Code CLI in Docker against scripted models.
package limits

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
)

// newApp copies the example app (the sandboxed coder on the scripted
// connector demo.yaml, and the direct qa) into a temporary folder, with
// appJSONC (a JSON object's fields, after data_root and auth) as its
// app.jsonc and script, when not empty, as the coder's model script.
func newApp(t testing.TB, appJSONC, script string) string {
	t.Helper()
	app := e2etest.CopyExampleApp(t, t.TempDir())
	cfg := `{"data_root": "./data", "sandbox": {"runtime": "docker"}, ` + e2etest.AuthJSONC
	if appJSONC != "" {
		cfg += ", " + appJSONC
	}
	cfg += "}"
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), cfg)
	if script != "" {
		e2etest.Write(t, filepath.Join(app, "connectors", "scripted", "demo.yaml"), script)
	}
	return app
}

// server is a running `agentbox serve`.
type server struct {
	*e2etest.Server
	tmp string // its TMPDIR: the bridge folders are under tmp/agentbox-bridge
}

// start runs `agentbox serve` on app with TMPDIR tmp ("" = a new one) and
// waits until it answers. Cleanup stops it (SIGTERM, then SIGKILL).
func start(t testing.TB, app, tmp string, args ...string) *server {
	t.Helper()
	testenv.Image(t)
	testenv.ClaudeBin(t)
	if tmp == "" {
		tmp = e2etest.ShortDir(t)
	}
	return &server{tmp: tmp, Server: e2etest.Serve(t, app, e2etest.Options{
		Env:  append([]string{"TMPDIR=" + tmp}, e2etest.TokenEnv()...),
		Args: append([]string{"--runtime", "docker"}, args...),
	})}
}

// get sends a GET with token and returns status and body.
func (s *server) get(t testing.TB, path, token string) (int, string) {
	t.Helper()
	return s.Send(t, http.MethodGet, path, token, "", nil)
}

// bridgeDirs lists the bridge session folders under the server's TMPDIR.
func bridgeDirs(t testing.TB, tmp string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(tmp, "agentbox-bridge"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// stallScript makes the coder's model answer nothing, ever: the turn only
// ends when canceled.
const stallScript = "turns:\n  - stall: true\n"

// slowScript answers after a delay, so turns overlap.
func slowScript(delay string) string {
	return fmt.Sprintf("turns:\n  - delay: %s\n    text: Done.\n", delay)
}
