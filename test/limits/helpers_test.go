// Package limits attacks a real `agentbox serve` the way a hostile agent
// or a heavy user would (issue 17): a turn that never ends and a shutdown,
// a server killed mid-turn and the one started after it, one token opening
// many sandboxes, concurrent turns on one chat, an upstream that keeps
// failing, and a chat id reused with another assistant. Sandboxed turns run
// the real Claude Code CLI in Docker against scripted models.
package limits

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
)

// Bearer tokens of the test apps (app.jsonc reads them from the
// environment).
const (
	tokenAlice    = "alice-token-0123456789"
	tokenBob      = "bob-token-0123456789"
	tokenOperator = "operator-token-0123456789"
)

// authJSONC is the auth block of every test app.
const authJSONC = `"auth": {"tokens": [{"token": "$ENV.T_ALICE", "user": "alice"}, {"token": "$ENV.T_BOB", "user": "bob"}], "metrics_token": "$ENV.T_OPERATOR"}`

// newApp copies the example app (the sandboxed coder on the scripted
// connector demo.yaml, and the direct qa) into a temporary folder, with
// appJSONC (a JSON object's fields, after data_root and auth) as its
// app.jsonc and script, when not empty, as the coder's model script.
func newApp(t testing.TB, appJSONC, script string) string {
	t.Helper()
	app := filepath.Join(t.TempDir(), "app")
	if out, err := exec.Command("cp", "-r", filepath.Join(testenv.RepoRoot(), "examples", "app"), app).CombinedOutput(); err != nil {
		t.Fatalf("copy the example app: %v\n%s", err, out)
	}
	_ = os.RemoveAll(filepath.Join(app, "data"))
	cfg := `{"data_root": "./data", "sandbox": {"runtime": "docker"}, ` + authJSONC
	if appJSONC != "" {
		cfg += ", " + appJSONC
	}
	cfg += "}"
	write(t, filepath.Join(app, "app.jsonc"), cfg)
	if script != "" {
		write(t, filepath.Join(app, "connectors", "scripted", "demo.yaml"), script)
	}
	return app
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shortDir is a temporary folder short enough for the bridge's socket
// paths (TMPDIR of the servers).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "abl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// server is a running `agentbox serve`.
type server struct {
	t    testing.TB
	url  string
	app  string
	tmp  string // its TMPDIR: the bridge folders are under tmp/agentbox-bridge
	cmd  *exec.Cmd
	logs *testenv.SyncBuffer
	done chan struct{}
}

// start runs `agentbox serve` on app with TMPDIR tmp ("" = a new one) and
// waits until it answers. Cleanup stops it (SIGTERM, then SIGKILL).
func start(t testing.TB, app, tmp string, args ...string) *server {
	t.Helper()
	testenv.Image(t)
	testenv.ClaudeBin(t)
	bin := testenv.Agentbox(t)
	if tmp == "" {
		tmp = shortDir(t)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := &server{t: t, url: "http://" + addr, app: app, tmp: tmp, logs: &testenv.SyncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--app", app, "--addr", addr, "--runtime", "docker"}, args...)...)
	s.cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "T_ALICE="+tokenAlice, "T_BOB="+tokenBob, "T_OPERATOR="+tokenOperator)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		s.stop(syscall.SIGTERM, 60*time.Second)
		if t.Failed() {
			t.Logf("server log:\n%s", s.logs.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("server exited:\n%s", s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up: %v\n%s", err, s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop signals the server and waits for it to exit, up to wait (then it
// is killed); it returns how long it took to exit.
func (s *server) stop(sig syscall.Signal, wait time.Duration) time.Duration {
	t0 := time.Now()
	select {
	case <-s.done:
		return 0
	default:
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
		return time.Since(t0)
	case <-time.After(wait):
		_ = s.cmd.Process.Kill()
		<-s.done
		s.t.Errorf("server did not exit within %s of %s", wait, sig)
		return time.Since(t0)
	}
}

// exited reports whether the server process ended, and its exit code.
func (s *server) exited() (bool, int) {
	select {
	case <-s.done:
		return true, s.cmd.ProcessState.ExitCode()
	default:
		return false, 0
	}
}

// reply is the outcome of one chat request.
type reply struct {
	status int
	header http.Header
	body   string       // error body (non-200)
	events []chat.Event // the native stream's events
	err    error        // transport error
}

// final is the done event's Final, or nil.
func (r reply) final() *chat.Final {
	for _, e := range r.events {
		if e.Event == chat.Done {
			return e.Final
		}
	}
	return nil
}

// chat sends one native chat turn and reads its stream to the end.
func (s *server) chat(ctx context.Context, token, assistant, chatID, message string) reply {
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": message})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/api/assistants/"+assistant+"/chat", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	r := reply{status: resp.StatusCode, header: resp.Header}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		r.body = string(b)
		return r
	}
	r.events, r.err = testenv.ReadEvents(resp.Body)
	return r
}

// get sends a GET with token and returns status and body.
func (s *server) get(t testing.TB, path, token string) (int, string) {
	t.Helper()
	return s.send(t, http.MethodGet, path, token, nil)
}

// send sends method path with token (none when "") and body, and returns
// status and body.
func (s *server) send(t testing.TB, method, path, token string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// containers lists our sandbox containers with label key=value.
func containers(t testing.TB, key, value string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-a", "--filter", "label=dev.agentbox.product=agentbox",
		"--filter", "label="+key+"="+value, "--format", "{{.Names}}").Output()
	if err != nil {
		t.Fatalf("docker ps: %v", err)
	}
	return strings.Fields(string(out))
}

// chatContainers lists the sandbox containers of a chat.
func chatContainers(t testing.TB, chatID string) []string {
	return containers(t, "dev.agentbox.chat", chatID)
}

// waitUntil polls cond every 50ms until it holds or timeout passes.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// uniq makes ids unique per test run, so parallel runs and leftovers of
// earlier runs never meet.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9)
}

// stallScript makes the coder's model answer nothing, ever: the turn only
// ends when canceled.
const stallScript = "turns:\n  - stall: true\n"

// slowScript answers after a delay, so turns overlap.
func slowScript(delay string) string {
	return fmt.Sprintf("turns:\n  - delay: %s\n    text: Done.\n", delay)
}
