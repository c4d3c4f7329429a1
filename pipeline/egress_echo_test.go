package pipeline

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/store"
)

// echoSecret is the real value of API_TOKEN: it must reach api.test and
// never come back.
const echoSecret = "tok_ECHOsecret_9f2b7c41d0e3a5"

// echoScript is a hostile agent's attempt to read a secret's value back
// from a host that echoes requests (egresstest.Echo): the placeholder in
// headers such a host shows (User-Agent, Accept), in the URL, and the
// credential header echoed as itself, Basic, base64, hex, escaped,
// gzip-compressed (asked for and not), one byte per chunk, in a trailer,
// in a redirect, through curl, Python and Node.js. Everything it saw goes
// into the workspace, which the test reads.
const echoScript = `set +e
H=https://api.test:{TLS}
{
echo "== user-agent"; curl -sS -A "$API_TOKEN" $H/echo/plain; echo
echo "== accept"; curl -sS -H "Accept: $API_TOKEN" $H/echo/plain; echo
echo "== url"; curl -sS "$H/echo/plain?t=$API_TOKEN"; echo
echo "== bearer"; curl -sS -i -H "Authorization: Bearer $API_TOKEN" $H/echo/plain; echo
echo "== basic"; curl -sS -i -u "x-access-token:$API_TOKEN" $H/echo/plain; echo
echo "== raw"; curl -sS -i -H "Authorization: $API_TOKEN" $H/echo/plain; echo
echo "== gzip"; curl -sS -i --compressed -H "Authorization: Bearer $API_TOKEN" $H/echo/gzip; echo
echo "== gzip raw"; curl -sS -H "Accept-Encoding: gzip, br" -H "Authorization: Bearer $API_TOKEN" $H/echo/gzip | base64 -w0; echo
echo "== deflate"; curl -sS -i -H "Authorization: Bearer $API_TOKEN" $H/echo/deflate; echo
echo "== drip"; curl -sS -N -i -H "Authorization: Bearer $API_TOKEN" $H/echo/drip; echo
echo "== trailer"; curl -sS --raw -i -H "Authorization: Bearer $API_TOKEN" $H/echo/trailer; echo
echo "== redirect"; curl -sS -i -H "Authorization: Bearer $API_TOKEN" "$H/echo/redirect?to=api.test:{TLS}"; echo
echo "== python"; python3 -c 'import os, urllib.request as u; r = u.urlopen(u.Request("'$H'/echo/plain", headers={"Authorization": "token " + os.environ["API_TOKEN"]})); print(r.headers); print(r.read().decode())' 2>&1
echo "== node"; node -e 'fetch("'$H'/echo/gzip", {headers: {authorization: "Bearer " + process.env.API_TOKEN}}).then(async r => console.log(r.status, JSON.stringify([...r.headers]), await r.text()), e => console.log("ERR", e.cause ? e.cause.message : e.message))' 2>&1
echo "== env"; env | grep API_TOKEN
} > /workspace/echo.out 2>&1
grep -c . /workspace/echo.out; echo "== done"`

// TestEgressEchoInDocker runs a hostile agent (Claude Code's Bash tool,
// the Gemini CLI's shell tool) in a network-less Docker sandbox whose
// API_TOKEN is a placeholder for a secret of api.test, a host that echoes
// everything it is sent. The value reaches the host with every credential
// form the agent tries; it comes back in none of the encodings the host
// uses: not in what the agent saw, its tool results, the model's requests,
// the session transcripts, the events, the logs or the store.
func TestEgressEchoInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	for _, cli := range []struct{ command, tool string }{{"claude", "Bash"}, {"gemini", "run_shell_command"}} {
		t.Run(cli.command, func(t *testing.T) { egressEcho(t, cli.command, cli.tool) })
	}
}

func egressEcho(t *testing.T, command, tool string) {
	image := testenv.CLIImage(t, command)
	t.Setenv("AB_ECHO_TOKEN", echoSecret)

	pki := egresstest.NewPKI(t)
	api := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The host checks the credential (so the test knows the value got
		// there), then echoes everything.
		auth := r.Header.Get("Authorization")
		cred, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic "))
		w.Header().Set("X-Valid", strconv.FormatBool(strings.HasSuffix(auth, echoSecret) || strings.HasSuffix(string(cred), ":"+echoSecret)))
		egresstest.Echo(w, r)
	}), "api.test")
	tlsPort := strconv.Itoa(api.Port)
	script := strings.NewReplacer("{TLS}", tlsPort).Replace(echoScript)

	model := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: tool, Input: map[string]any{"command": script, "timeout": 120000}}}},
		{When: &scripted.Match{AfterToolResult: tool}, Text: "Done."},
	}})
	t.Cleanup(model.Close)

	d := dockerTurn(t, pki, map[string]string{
		"connectors/model.conn.yao": `{"type": "anthropic", "options": {"host": "` + model.URL + `", "key": "sk-model-key", "model": "claude-sonnet-4-5"}}`,
		"app.jsonc":                 `{"data_root": "data"}`,
		"assistants/coder/package.yao": `{
			"connector": "model",
			"sandbox": {
				"command": "` + command + `", "image": "` + image + `", "timeout": "3m", "max_memory": "1g",
				"arguments": {"max_turns": 6, "permission_mode": "bypassPermissions"},
				"network": {"allow": ["api.test:` + tlsPort + `"], "hosts": {"api.test": "127.0.0.1"}},
				"secrets": {"API_TOKEN": {"value": "$ENV.AB_ECHO_TOKEN", "hosts": ["api.test:` + tlsPort + `"]}}
			}
		}`,
	}, "Read the token back.", dockerOpts{})
	rec := d.rec

	// What the agent saw.
	out := d.workspace(t, "echo.out")
	low := strings.ToLower(out)
	t.Logf("the agent saw %d bytes; its start:\n%.3000s", len(out), out)
	for section, want := range map[string][]string{
		"== user-agent": {"placeholder of secret API_TOKEN in the User-Agent header"},
		"== accept":     {"placeholder of secret API_TOKEN in the Accept header"},
		"== url":        {"placeholder of secret API_TOKEN in the URL"},
		"== bearer":     {"x-valid: true", "bearer ****"},
		"== basic":      {"x-valid: true"},
		"== raw":        {"x-valid: true", "x-echo-authorization: ****"},
		"== gzip":       {"x-valid: true", "bearer ****"},
		"== deflate":    {"x-valid: true", "bearer ****"},
		"== drip":       {"x-valid: true", "bearer ****"},
		"== trailer":    {"x-valid: true", "x-echo-trailer: bearer ****"},
		"== redirect":   {"302", "location: https://api.test:" + tlsPort + "/landing?auth=bearer+****"},
		"== python":     {"x-valid: true", "token ****"},
		"== node":       {"200", "bearer ****"},
		"== env":        {"api_token=agentbox-placeholder-api_token-"},
	} {
		sec := strings.ToLower(section)
		got := section
		if _, rest, ok := strings.Cut(low, sec+"\n"); ok {
			got, _, _ = strings.Cut(rest, "\n== ")
		}
		for _, w := range want {
			if !strings.Contains(got, strings.ToLower(w)) {
				t.Errorf("%s: lacks %q in:\n%.2000s", section, w, got)
			}
		}
		if (section == "== gzip" || section == "== deflate") && strings.Contains(got, "content-encoding:") {
			t.Errorf("%s: the body came with its encoding: the proxy must decode to scrub", section)
		}
	}
	// The host got the value each time the agent sent the placeholder
	// where it goes.
	valid := 0
	for _, r := range api.Requests() {
		if strings.Contains(r.Header.Get("Authorization"), echoSecret) || strings.Contains(r.Header.Get("Authorization"), "Basic ") {
			valid++
		}
		for k, vs := range r.Header {
			if k != "Authorization" && strings.Contains(strings.Join(vs, " "), echoSecret) {
				t.Errorf("the host got the value in %s", k)
			}
		}
	}
	if valid < 10 {
		t.Errorf("the host got the value %d times, want every credential form (%d requests)", valid, len(api.Requests()))
	}

	// Nowhere the value, in any encoding the host used: what the agent
	// saw, the events, the model's requests (the tool result goes there),
	// the logs, and every file of the data root (workspace with the CLI's
	// transcripts, store).
	d.checkNowhere(t, model, map[string]string{"the agent's output": out}, echoSecret)
	var results int
	for _, e := range rec.Starts(chat.TypeToolResult) {
		if c, _ := e.Props["content"].(string); strings.Contains(c, "== done") {
			results++
		}
	}
	if results != 1 {
		t.Errorf("%d tool results from the script", results)
	}
}

// dockerRun is a turn dockerTurn ran.
type dockerRun struct {
	dir  string // the app folder, with the data root under data/
	rec  *chattest.Recorder
	resp *Response
	logs *bytes.Buffer
}

// dockerOpts are what a test of dockerTurn may set.
type dockerOpts struct {
	// instance is the Docker runtime's instance label ("": one of its own).
	instance string
	// tools are Go host tools the pipeline registers.
	tools map[string]bridge.Tool
}

// dockerTurn loads the app of files into a new folder and runs one turn of
// its assistant "coder" for user alice in chat "c", in a Docker sandbox
// with the bridge (the egress proxy trusting pki), a store and debug logs.
// The turn must succeed.
func dockerTurn(t *testing.T, pki *egresstest.PKI, files map[string]string, message string, opts dockerOpts) *dockerRun {
	t.Helper()
	if opts.instance == "" {
		opts.instance = "pipeline-sec-" + strconv.FormatInt(time.Now().UnixNano()%1e6, 10)
	}
	bin := testenv.Agentbox(t)
	dir := t.TempDir()
	for p, c := range files {
		abs := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app, err := assistant.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Instance: opts.instance})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(dir, "data", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	run := &dockerRun{dir: dir, rec: &chattest.Recorder{}, logs: &bytes.Buffer{}}
	logger := slog.New(slog.NewJSONHandler(&syncWriter{w: run.logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := New(Config{
		App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"docker": rt}, DefaultRuntime: "docker",
		Workspaces: ws, History: st, Usage: st, Logger: logger,
		Bridge: &BridgeConfig{Binary: bin, Dir: filepath.Join(os.TempDir(), "abx"), EgressRootCAs: pki.Pool(), Tools: opts.tools},
	})
	if err != nil {
		t.Fatal(err)
	}
	run.resp, err = p.Chat(ctx, &Request{UserID: "alice", ChatID: "c", AssistantID: "coder", Messages: user(message)}, run.rec.Emit)
	if cerr := p.Close(context.Background()); cerr != nil {
		t.Errorf("pipeline close: %v", cerr)
	}
	chattest.Check(t, run.rec.Events())
	if err != nil {
		t.Fatalf("turn: %v\nevents: %+v", err, run.rec.Events())
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return run
}

// workspace reads a file of the chat's workspace.
func (d *dockerRun) workspace(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, "data", "workspaces", "alice", "c", name))
	if err != nil {
		t.Fatalf("workspace file %s: %v", name, err)
	}
	return string(b)
}

// checkNowhere fails t when a value of secrets is, in any encoding
// egresstest.Leaks knows, in places, the events, the model's requests (the
// tool results go there), the logs or any file of the data root (the
// workspace with the CLI's configuration and transcripts, the store).
func (d *dockerRun) checkNowhere(t *testing.T, model *scripted.Server, places map[string]string, secrets ...string) {
	t.Helper()
	evs, _ := json.Marshal(d.rec.Events())
	places["events"], places["logs"] = string(evs), d.logs.String()
	for i, r := range model.Requests() {
		places["model request "+strconv.Itoa(i)] = string(r.Body)
	}
	err := filepath.WalkDir(filepath.Join(d.dir, "data"), func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		if b, err := os.ReadFile(path); err == nil {
			places[path] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for where, s := range places {
		for _, secret := range secrets {
			if l := egresstest.Leaks(secret, s); len(l) > 0 {
				t.Errorf("a real value is in %s (%v)", where, l)
			}
		}
	}
}
