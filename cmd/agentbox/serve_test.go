package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/internal/testenv"
)

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// localApp is the example app set to the local runtime, so the test
// needs no Docker engine and touches no containers.
func localApp(t *testing.T, extra string) string {
	t.Helper()
	app := exampleApp(t)
	cfg := `{"data_root": "./data", "sandbox": {"runtime": "local"}` + extra + `}`
	if err := os.WriteFile(filepath.Join(app, "app.jsonc"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return app
}

// TestServe serves the example app, answers on every kind of endpoint,
// and exits 0 when the context ends (SIGTERM).
func TestServe(t *testing.T) {
	app := localApp(t, "")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	exited := make(chan int, 1)
	go func() { exited <- runServe(ctx, []string{"--app", app, "--addr", addr}, &stdout, &stderr) }()

	base := "http://" + addr
	waitUp(t, base, exited, &stderr)
	get := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// What to open, and what is served, on stdout.
	if out := stdout.String(); !strings.Contains(out, "agentbox is serving "+app+": 5 assistants (coder, codex, gemini, opencode, qa)\n") ||
		!strings.Contains(out, "Open "+base+"/ in a browser") {
		t.Errorf("stdout at start:\n%s", out)
	}
	if code, body := get("GET", "/v1/models", ""); code != 200 || !strings.Contains(body, `"id":"qa"`) || !strings.Contains(body, `"id":"coder"`) {
		t.Errorf("models = %d %s", code, body)
	}
	if code, body := get("POST", "/v1/chat/completions", `{"model":"qa","messages":[{"role":"user","content":"hi"}]}`); code != 200 || !strings.Contains(body, `"object":"chat.completion"`) {
		t.Errorf("completion = %d %s", code, body)
	}
	if code, body := get("POST", "/api/assistants/qa/chat", `{"chat_id":"c1","message":"hi"}`); code != 200 || !strings.Contains(body, "event: done") {
		t.Errorf("native = %d %s", code, body)
	}
	code, body := get("GET", "/metrics", "")
	for _, want := range []string{`agentbox_turns_total{assistant="qa",outcome="ok"} 2`, `agentbox_circuit_breaker_state{connector="scripted.qa",state="closed"} 1`,
		"agentbox_sandboxes_live 0", "agentbox_turn_phase_duration_seconds_bucket", "go_goroutines", "process_resident_memory_bytes",
		"agentbox_workspaces_mounted 0", "agentbox_workspace_loop_devices 0"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics = %d, lack %q", code, want)
		}
	}
	// The data root is measured in the background, once at start.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, body = get("GET", "/metrics", "")
		if strings.Contains(body, "agentbox_workspaces 0") && !strings.Contains(body, "agentbox_data_root_measured_timestamp_seconds 0") &&
			!strings.Contains(body, "agentbox_data_root_filesystem_size_bytes 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack the data root usage:\n%s", grepLines(body, "agentbox_data_root", "agentbox_workspace"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
	log := stderr.String()
	for _, want := range []string{"development mode", "serving", "stopped"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

func TestServeRefuses(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		args  []string
		code  int
		want  string
	}{
		{"public without tokens", "", []string{"--addr", "0.0.0.0:0"}, 1, "auth.tokens"},
		{"token variable unset", `, "auth": {"tokens": [{"token": "$ENV.AGENTBOX_TEST_UNSET_TOKEN", "user": "alice"}]}`, nil, 1, "AGENTBOX_TEST_UNSET_TOKEN: environment variable is not set"},
		{"stray argument", "", []string{"extra"}, 2, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := localApp(t, tt.extra)
			var stdout, stderr bytes.Buffer
			args := append([]string{"--app", app}, tt.args...)
			if tt.args == nil {
				args = append(args, "--addr", freeAddr(t))
			}
			code := runServe(context.Background(), args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("serve = %d, stderr:\n%s\nwant %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}

// grepLines returns the lines of s that start with one of the prefixes.
func grepLines(s string, prefixes ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// TestServeDegrades serves an app in which some assistants have errors:
// the others serve, and those are listed (health, assistants API) with
// their positioned errors; a request to one is a 503 naming its first.
func TestServeDegrades(t *testing.T) {
	app := t.TempDir()
	if err := os.CopyFS(app, os.DirFS(filepath.Join(appsDir, "bad-partial"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(app, "app.jsonc"), []byte(`{"data_root": "./data", "sandbox": {"runtime": "local"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr testenv.SyncBuffer
	exited := make(chan int, 1)
	go func() { exited <- runServe(ctx, []string{"--app", app, "--addr", addr}, &stdout, &stderr) }()
	base := "http://" + addr
	waitUp(t, base, exited, &stderr)
	get := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("GET", "/health", "")
	var health struct {
		Status     string
		Assistants struct {
			Serving int
			Failed  []struct{ ID, Error string }
		}
	}
	if err := json.Unmarshal([]byte(body), &health); err != nil || code != 200 || health.Status != "degraded" || health.Assistants.Serving != 3 || len(health.Assistants.Failed) != 7 {
		t.Fatalf("health = %d %s", code, body)
	}
	if f := health.Assistants.Failed[1]; f.ID != "badfield" || !strings.Contains(f.Error, `assistants/badfield/package.yao:4:16: unknown field "temprature"`) {
		t.Errorf("failed[1] = %+v", f)
	}
	code, body = get("GET", "/api/assistants", "")
	var list struct {
		Data []struct {
			ID        string
			Name      string
			Available bool
			Error     *struct {
				Message  string
				Problems []struct {
					File      string
					Line, Col int
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != 200 || len(list.Data) != 10 {
		t.Fatalf("assistants = %d %s", code, body)
	}
	for _, a := range list.Data {
		broken := a.ID != "ok" && a.ID != "direct" && a.ID != "team.lead"
		if a.Available == broken || (a.Error != nil) != broken {
			t.Errorf("assistant %s: available %v, error %+v", a.ID, a.Available, a.Error)
		}
		if a.ID == "badhook" && (a.Name != "Bad hook" || a.Error.Problems[0].File != "assistants/badhook/src/index.ts" || a.Error.Problems[0].Line != 2) {
			t.Errorf("badhook = %+v", a)
		}
	}
	code, body = get("POST", "/v1/chat/completions", `{"model":"badconn","messages":[{"role":"user","content":"hi"}]}`)
	if code != 503 || !strings.Contains(body, `"code":"assistant_unavailable"`) || !strings.Contains(body, `connectors/broken/typo.conn.yao has errors`) {
		t.Errorf("completion of a failed assistant = %d %s", code, body)
	}
	code, body = get("POST", "/api/assistants/badhook/chat", `{"chat_id":"c1","message":"hi"}`)
	if code != 503 || !strings.Contains(body, `assistants/badhook/src/index.ts:2:53`) {
		t.Errorf("native turn of a failed assistant = %d %s", code, body)
	}
	if code, body := get("POST", "/v1/chat/completions", `{"model":"ok","messages":[{"role":"user","content":"hi"}]}`); code != 200 || !strings.Contains(body, "Hello from an assistant that runs.") {
		t.Errorf("completion = %d %s", code, body)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
	if log := stderr.String(); !strings.Contains(log, "assistant does not run: its definition has errors") || !strings.Contains(log, "assistant=badmcp") {
		t.Errorf("log lacks the failed assistants:\n%s", log)
	}
}

// waitUp waits for the server at base to answer /health, failing when
// serve exits first.
func waitUp(t testing.TB, base string, exited <-chan int, stderr *testenv.SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case code := <-exited:
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not up: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPrintServingFailed names the assistants that did not load, each with
// its first error, and where to see them all.
func TestPrintServingFailed(t *testing.T) {
	app := &assistant.App{
		Assistants: map[string]*assistant.Assistant{"qa": {ID: "qa"}},
		Failed: map[string]*assistant.Failed{"coder": {ID: "coder", Problems: []assistant.Problem{
			{File: "assistants/coder/package.yao", Line: 3, Col: 5, Msg: "unknown field"},
			{File: "assistants/coder/package.yao", Line: 4, Col: 5, Msg: "another"},
		}}},
	}
	var out bytes.Buffer
	printServing(&out, "/app", app, nil, "[::]:5099", false)
	for _, want := range []string{
		"agentbox is serving /app: 1 assistant (qa)\n",
		"1 assistant did not load (`agentbox check` lists every problem; fixed files are reloaded):\n",
		`  assistant "coder" cannot run: its definition has errors: assistants/coder/package.yao:3:5: unknown field (and 1 more: agentbox check lists them)` + "\n",
		"Open http://127.0.0.1:5099/ in a browser",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
