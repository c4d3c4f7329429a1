package server

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/checkpoint"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/scripted"
	"github.com/agentbox/agentbox/store"
)

// chatsEnv is a server over the real pipeline: a direct assistant "qa" on
// a scripted model, a sandboxed "coder" on the local (bubblewrap)
// runtime for terminals, the SQLite store and real workspaces.
type chatsEnv struct {
	ts   *httptest.Server
	wss  *sandbox.Workspaces
	data string
}

func newChatsEnv(t *testing.T, mod func(*Config)) *chatsEnv {
	t.Helper()
	return newChatsEnvOn(t, "", mod)
}

// newChatsEnvOn is newChatsEnv with its store in the PostgreSQL database
// dsn ("": SQLite in the data folder).
func newChatsEnvOn(t *testing.T, dsn string, mod func(*Config)) *chatsEnv {
	t.Helper()
	turns := []scripted.Turn{{When: &scripted.Match{Contains: "stall"}, Stall: true}}
	for range 10 {
		turns = append(turns, scripted.Turn{Text: "Paris."})
	}
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	data := filepath.Join(dir, "data")
	wss, err := sandbox.NewWorkspaces(data, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	sc := store.Config{Driver: "sqlite", Path: filepath.Join(data, "agentbox.db")}
	if dsn != "" {
		sc = store.Config{Driver: "postgres", DSN: dsn}
	}
	st, err := store.OpenConfig(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{
			"test.llm": {ID: "test.llm", Type: "openai", Options: assistant.ConnectorOptions{Host: srv.URL, Key: "sk-test", Model: "m1"}},
		},
		Assistants: map[string]*assistant.Assistant{
			"qa":    {ID: "qa", Name: "QA", Connector: "test.llm"},
			"coder": {ID: "coder", Name: "Coder", Connector: "test.llm", Sandbox: &assistant.Sandbox{Command: "claude"}},
		},
	}
	cps, err := checkpoint.Open(filepath.Join(data, "checkpoints"), checkpoint.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	app.Config.Cleanup.Checkpoints = assistant.DefaultCheckpoints
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: app}, Runtimes: map[string]sandbox.Runtime{"local": rt},
		DefaultRuntime: "local", Workspaces: wss, Checkpoints: cps, History: st, Memory: pipeline.StoreMemory(st), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	cfg := Config{Backend: p, Chats: p, Responses: st, Tokens: testTokens, Logger: quietLogger()}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &chatsEnv{ts: ts, wss: wss, data: data}
}

func decode[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

// put uploads body to the chat's workspace path.
func put(t *testing.T, ts *httptest.Server, token, chatID, path string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", ts.URL+"/api/chats/"+chatID+"/files?path="+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestChatsAPI(t *testing.T) {
	e := newChatsEnv(t, nil)
	ts := e.ts
	if resp, body := do(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"c1","message":"Capital of France?"}`); resp.StatusCode != 200 || !strings.Contains(body, "Paris.") {
		t.Fatalf("turn: %d %s", resp.StatusCode, body)
	}
	_, body := do(t, ts, "GET", "/api/chats", tokenAlice, "")
	list := decode[listResponse[pipeline.ChatInfo]](t, body)
	if len(list.Data) != 1 || list.Data[0].ID != "c1" || list.Data[0].Title != "Capital of France?" || list.Data[0].AssistantID != "qa" || list.Data[0].Running {
		t.Fatalf("list: %s", body)
	}
	if _, body := do(t, ts, "GET", "/api/chats", tokenBob, ""); strings.Contains(body, "c1") {
		t.Errorf("bob lists alice's chat: %s", body)
	}
	resp, body := do(t, ts, "GET", "/api/chats/c1", tokenAlice, "")
	got := decode[struct {
		History []chat.Message `json:"history"`
		Turn    *TurnState     `json:"turn"`
	}](t, body)
	if resp.StatusCode != 200 || len(got.History) != 2 || got.History[1].Content != "Paris." || got.Turn == nil || got.Turn.Running || got.Turn.Prompt != "Capital of France?" {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []struct {
		method, path, token, body string
		status                    int
		want                      string
	}{
		{"GET", "/api/chats/c1", tokenBob, "", 404, "no chat"},
		{"GET", "/api/chats/nope", tokenAlice, "", 404, "no chat"},
		{"GET", "/api/chats/a%20b", tokenAlice, "", 400, "chat id"},
		{"PATCH", "/api/chats/c1", tokenAlice, `{"title":"Geography"}`, 200, `"title":"Geography"`},
		{"PATCH", "/api/chats/c1", tokenAlice, `{"name":"x"}`, 400, `unknown field`},
		{"PATCH", "/api/chats/c1", tokenAlice, `{}`, 400, "title is missing"},
		{"PATCH", "/api/chats/c1", tokenAlice, `{"title":"a\nb"}`, 400, "line break"},
		{"PATCH", "/api/chats/c1", tokenBob, `{"title":"mine"}`, 404, "no chat"},
		{"PUT", "/api/chats/c1", tokenAlice, `{}`, 405, "GET, HEAD, PATCH, DELETE"},
		{"DELETE", "/api/chats/c1/files", tokenAlice, "", 405, "GET, HEAD, PUT"},
		{"POST", "/api/chats/c1/cancel", tokenAlice, "", 200, `"canceled":0`},
		{"GET", "/api/chats", "", "", 401, "missing bearer token"},
	} {
		resp, body := do(t, ts, tc.method, tc.path, tc.token, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s %s = %d %s; want %d and %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.want)
		}
	}

	// DELETE removes the chat, its history and its workspace.
	if code, body := put(t, ts, tokenAlice, "c1", "a.txt", []byte("x")); code != 201 {
		t.Fatalf("upload: %d %s", code, body)
	}
	if resp, body := do(t, ts, "DELETE", "/api/chats/c1", tokenBob, ""); resp.StatusCode != 404 {
		t.Errorf("bob deletes alice's chat: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, ts, "DELETE", "/api/chats/c1", tokenAlice, ""); resp.StatusCode != 200 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, ts, "GET", "/api/chats/c1", tokenAlice, ""); resp.StatusCode != 404 {
		t.Errorf("deleted chat: %d", resp.StatusCode)
	}
	if dir, _ := e.wss.Path("alice", "c1"); dirExists(dir) {
		t.Error("the deleted chat's workspace is left")
	}
	if resp, _ := do(t, ts, "DELETE", "/api/chats/c1", tokenAlice, ""); resp.StatusCode != 404 {
		t.Errorf("second delete: %d", resp.StatusCode)
	}
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// TestCancelAPI: POST cancel ends a running turn, answers once it ended,
// and the turn's stream ends with the canceled error.
func TestCancelAPI(t *testing.T) {
	e := newChatsEnv(t, nil)
	// The stream's headers come with its first event (a failure before it
	// is an HTTP error), which the stalled model never sends: the request
	// waits in the background.
	type answer struct {
		status int
		body   string
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.ts.URL+"/api/assistants/qa/chat", strings.NewReader(`{"chat_id":"c2","message":"stall please","detach":true}`))
		req.Header.Set("Authorization", "Bearer "+tokenAlice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.ts.Client().Do(req)
		if err != nil {
			answered <- answer{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, string(b)}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body := do(t, e.ts, "GET", "/api/chats/c2", tokenAlice, "")
		if strings.Contains(body, `"running":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn does not run: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A direct assistant's turn takes no message or interrupt while it
	// runs (only a kept Claude Code or Codex CLI does); another user's chat is not
	// found; a bad message is refused as such.
	for _, tc := range []struct {
		path, token, body string
		status            int
		want              string
	}{
		{"/api/chats/c2/messages", tokenBob, `{"content":"hi"}`, 404, "no chat"},
		{"/api/chats/c2/interrupt", tokenBob, "", 404, "no chat"},
		{"/api/chats/c2/messages", tokenAlice, `{"content":"hi"}`, 409, "takes no message"},
		{"/api/chats/c2/interrupt", tokenAlice, "", 409, "takes no message"},
		{"/api/chats/c2/messages", tokenAlice, `{"content":"  "}`, 400, "content is empty"},
		{"/api/chats/c2/messages", tokenAlice, `{"text":"hi"}`, 400, "text"},
	} {
		if resp, body := do(t, e.ts, "POST", tc.path, tc.token, tc.body); resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("POST %s %s: %d %s, want %d with %q", tc.path, tc.body, resp.StatusCode, body, tc.status, tc.want)
		}
	}
	if resp, body := do(t, e.ts, "POST", "/api/chats/c2/cancel", tokenBob, ""); resp.StatusCode != 200 || !strings.Contains(body, `"canceled":0`) {
		t.Errorf("bob cancels alice's turn: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, e.ts, "POST", "/api/chats/c2/cancel", tokenAlice, "")
	if resp.StatusCode != 200 || !strings.Contains(body, `"canceled":1`) {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	// Nothing was streamed yet, so the turn's request gets its error as
	// an HTTP answer: 499, canceled.
	if a := <-answered; a.status != 499 || !strings.Contains(a.body, `"code":"canceled"`) {
		t.Errorf("the turn's request got %d %s", a.status, a.body)
	}
	if _, body := do(t, e.ts, "GET", "/api/chats/c2", tokenAlice, ""); strings.Contains(body, `"running":true`) {
		t.Errorf("still running after cancel: %s", body)
	}
	// Refused: no turn runs to take it. The canceled turn may or may not
	// have stored the chat by now (409, or 404 for a chat with nothing
	// stored).
	resp, body = do(t, e.ts, "POST", "/api/chats/c2/messages", tokenAlice, `{"content":"hi"}`)
	if !(resp.StatusCode == 409 && strings.Contains(body, "no running turn") || resp.StatusCode == 404 && strings.Contains(body, "no chat")) {
		t.Errorf("message after the turn ended: %d %s", resp.StatusCode, body)
	}
}

func TestUploadAndZip(t *testing.T) {
	e := newChatsEnv(t, func(c *Config) { c.UploadLimit = 1000 })
	ts := e.ts
	// An upload creates the chat's workspace.
	code, body := put(t, ts, tokenAlice, "c3", "src/hello.txt", []byte("hello"))
	if code != 201 || !strings.Contains(body, `"path":"src/hello.txt"`) || !strings.Contains(body, `"size":5`) {
		t.Fatalf("upload: %d %s", code, body)
	}
	if code, body := put(t, ts, tokenAlice, "c3", "/workspace/src/hello.txt", []byte("hello again")); code != 200 || !strings.Contains(body, `"created":false`) {
		t.Errorf("replace: %d %s", code, body)
	}
	if resp, body := do(t, ts, "GET", "/api/chats/c3/files?path=src/hello.txt", tokenAlice, ""); resp.StatusCode != 200 || body != "hello again" {
		t.Errorf("read back: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, ts, "GET", "/api/chats/c3/files?path=src/hello.txt", tokenBob, ""); resp.StatusCode != 404 {
		t.Errorf("bob reads alice's file: %d", resp.StatusCode)
	}
	// The agent planted a symlink that leads out of the workspace.
	dir, _ := e.wss.Path("alice", "c3")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path   string
		size   int
		status int
		want   string
	}{
		{"", 1, 400, "path is missing"},
		{"../x.txt", 1, 400, "outside"},
		{"/etc/x.txt", 1, 400, "outside"},
		{"out/x.txt", 1, 400, "outside"},
		{"src", 1, 409, "is a folder"},
		{"src/", 1, 400, "names a folder"},
		{"big.bin", 1001, 413, "upload limit"},
	} {
		code, body := put(t, ts, tokenAlice, "c3", tc.path, bytes.Repeat([]byte("x"), tc.size))
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("PUT %q: %d %s; want %d and %q", tc.path, code, body, tc.status, tc.want)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("an upload went through the symlink: %v", ents)
	}

	resp, zbody := do(t, ts, "GET", "/api/chats/c3/files?path=.&format=zip", tokenAlice, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/zip" || resp.Header.Get("Content-Disposition") != "attachment; filename=c3.zip" {
		t.Fatalf("zip: %d %v", resp.StatusCode, resp.Header)
	}
	zr, err := zip.NewReader(strings.NewReader(zbody), int64(len(zbody)))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "src/,src/hello.txt" {
		t.Errorf("zip entries %v (the symlink must not be followed)", names)
	}
	for _, tc := range []struct{ q, want string }{
		{"path=src/hello.txt&format=zip", "takes a folder"},
		{"path=.&format=tar", "format"},
	} {
		if resp, body := do(t, ts, "GET", "/api/chats/c3/files?"+tc.q, tokenAlice, ""); resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.q, resp.StatusCode, body)
		}
	}
}

// dialTerminal opens the terminal WebSocket of a chat as the browser
// does: the token offered as a subprotocol.
func dialTerminal(ctx context.Context, ts *httptest.Server, chatID, token, query string, hdr http.Header) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(ts.URL, "http") + "/api/chats/" + chatID + "/terminal" + query
	protos := []string{TerminalProtocol}
	if token != "" {
		protos = append(protos, WebSocketTokenPrefix+base64.RawURLEncoding.EncodeToString([]byte(token)))
	}
	return websocket.Dial(ctx, u, &websocket.DialOptions{Subprotocols: protos, HTTPHeader: hdr})
}

// readUntil reads the terminal's messages until a control message of
// type typ, collecting its output.
func readUntil(t *testing.T, ctx context.Context, c *websocket.Conn, typ string) (terminalMessage, string) {
	t.Helper()
	var out strings.Builder
	for {
		mt, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read (waiting for %q; output so far %q): %v", typ, out.String(), err)
		}
		if mt == websocket.MessageBinary {
			out.Write(b)
			continue
		}
		var m terminalMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Type == typ {
			return m, out.String()
		}
		if m.Type == "error" {
			t.Fatalf("error message: %+v", m)
		}
	}
}

func TestTerminalWebSocket(t *testing.T) {
	e := newChatsEnv(t, func(c *Config) { c.TerminalIdle = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c, _, err := dialTerminal(ctx, e.ts, "c4", tokenAlice, "?rows=30&cols=100&assistant=coder", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	if c.Subprotocol() != TerminalProtocol {
		t.Errorf("subprotocol %q", c.Subprotocol())
	}
	ready, _ := readUntil(t, ctx, c, "ready")
	if ready.AssistantID != "coder" || ready.Runtime != "local" {
		t.Errorf("ready: %+v", ready)
	}
	resize, _ := json.Marshal(terminalMessage{Type: "resize", Rows: 40, Cols: 120})
	if err := c.Write(ctx, websocket.MessageText, resize); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(ctx, websocket.MessageBinary, []byte("stty size; echo \"made-$((40+2))\" > t.txt; cat t.txt; exit 4\n")); err != nil {
		t.Fatal(err)
	}
	exit, out := readUntil(t, ctx, c, "exit")
	if exit.Code == nil || *exit.Code != 4 || !strings.Contains(out, "made-42") || !strings.Contains(out, "40 120") {
		t.Errorf("exit %+v, output %q", exit, out)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("after exit: %v", err)
	}
	if dir, _ := e.wss.Path("alice", "c4"); !strings.Contains(readFile(filepath.Join(dir, "t.txt")), "made-42") {
		t.Error("the file the shell wrote is not in the workspace")
	}

	// Idle terminals are closed.
	c2, _, err := dialTerminal(ctx, e.ts, "c4", tokenAlice, "?assistant=coder", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.CloseNow()
	readUntil(t, ctx, c2, "ready")
	closed, _ := readUntil(t, ctx, c2, "closed")
	if !strings.Contains(closed.Reason, "idle") {
		t.Errorf("closed: %+v", closed)
	}

	// Refusals: no token, another site's page, not a WebSocket, bad sizes,
	// an assistant without a sandbox.
	if _, resp, err := dialTerminal(ctx, e.ts, "c4", "", "", nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("no token: %v %v", err, resp)
	}
	if _, resp, err := dialTerminal(ctx, e.ts, "c4", "wrong-token", "", nil); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Errorf("wrong token: %v %v", err, resp)
	}
	if _, resp, err := dialTerminal(ctx, e.ts, "c4", tokenAlice, "", http.Header{"Origin": {"http://evil.example"}}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("cross-origin: %v %v", err, resp)
	}
	if resp, body := do(t, e.ts, "GET", "/api/chats/c4/terminal", tokenAlice, ""); resp.StatusCode != 426 || !strings.Contains(body, "WebSocket") {
		t.Errorf("plain GET: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, e.ts, "GET", "/api/chats/c4/terminal?rows=0", tokenAlice, ""); resp.StatusCode != 400 || !strings.Contains(body, "rows") {
		t.Errorf("rows=0: %d %s", resp.StatusCode, body)
	}
	c3, _, err := dialTerminal(ctx, e.ts, "c4", tokenAlice, "?assistant=qa", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.CloseNow()
	_, b, err := c3.Read(ctx)
	if err != nil || !strings.Contains(string(b), "without a sandbox") {
		t.Errorf("unsandboxed assistant: %s %v", b, err)
	}
	if _, _, err := c3.Read(ctx); websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("after the error: %v", err)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func TestWebPage(t *testing.T) {
	t.Parallel()
	assets := fstest.MapFS{
		"index.html":      {Data: []byte("<!doctype html><title>app</title>")},
		"assets/app-X.js": {Data: []byte(strings.Repeat("console.log(1);", 200))},
	}
	ts := startServer(t, newFake(t), func(c *Config) { c.Assets = assets })
	resp, body := do(t, ts, "GET", "/", "", "")
	if resp.StatusCode != 200 || !strings.Contains(body, "<title>app</title>") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("page: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/assets/app-X.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	r2, err := ts.Client().Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	if r2.StatusCode != 200 || r2.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(r2.Header.Get("Cache-Control"), "immutable") ||
		!strings.HasPrefix(r2.Header.Get("Content-Type"), "text/javascript") {
		t.Errorf("asset: %d %v", r2.StatusCode, r2.Header)
	}
	for _, p := range []string{"/assets/nope.js", "/assets/../index.html", "/nope"} {
		if resp, _ := do(t, ts, "GET", p, "", ""); resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	// A binary built without the bundle says so.
	ts2 := startServer(t, newFake(t), func(c *Config) { c.Assets = fstest.MapFS{} })
	if _, body := do(t, ts2, "GET", "/", "", ""); !strings.Contains(body, "make build") {
		t.Errorf("unbuilt page: %s", body)
	}
}

// TestChatsRewindForkAndResponsesBranch: over the real pipeline and store
// (SQLite, and PostgreSQL), a direct chat's checkpoints, a rewind and a
// fork through the API, a Responses client continuing from an older
// response, which branches, and an edited message sent again, with its
// branches listed and switched.
func TestChatsRewindForkAndResponsesBranch(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testChatsBranching(t, newChatsEnv(t, nil)) })
	t.Run("postgres", func(t *testing.T) {
		testChatsBranching(t, newChatsEnvOn(t, testenv.Postgres(t).NewDatabase(t), nil))
	})
}

func testChatsBranching(t *testing.T, e *chatsEnv) {
	call := func(method, path, body string) (int, string) {
		t.Helper()
		resp, out := do(t, e.ts, method, path, tokenAlice, body)
		return resp.StatusCode, out
	}
	create := func(body string) (map[string]any, string) {
		t.Helper()
		resp, out := do(t, e.ts, "POST", "/v1/responses", tokenAlice, body)
		if resp.StatusCode != 200 {
			t.Fatalf("responses %s: %d %s", body, resp.StatusCode, out)
		}
		return decodeResponse(t, out), resp.Header.Get("X-Chat-ID")
	}
	r1, c1 := create(`{"model":"qa","input":"one"}`)
	_, c2 := create(`{"model":"qa","input":"two","previous_response_id":"` + r1["id"].(string) + `"}`)
	if c2 != c1 {
		t.Fatalf("the newest response continues its chat: %q, want %q", c2, c1)
	}
	code, out := call("GET", "/api/chats/"+c1+"/checkpoints", "")
	list := decode[struct {
		Data []pipeline.CheckpointInfo `json:"data"`
	}](t, out)
	// The state before the first turn, then one after each turn.
	if code != 200 || len(list.Data) != 3 || !list.Data[0].Before || list.Data[1].Turn != 1 || !list.Data[2].Head {
		t.Fatalf("checkpoints: %d %s", code, out)
	}

	// An older response branches: a new chat from turn 1, the old one
	// untouched.
	_, c3 := create(`{"model":"qa","input":"branch","previous_response_id":"` + r1["id"].(string) + `"}`)
	if c3 == "" || c3 == c1 {
		t.Fatalf("branch chat %q (parent %q)", c3, c1)
	}
	history := func(chatID string) []string {
		t.Helper()
		code, out := call("GET", "/api/chats/"+chatID, "")
		d := decode[pipeline.ChatDetail](t, out)
		if code != 200 {
			t.Fatalf("chat %s: %d %s", chatID, code, out)
		}
		var users []string
		for _, m := range d.History {
			if m.Role == chat.RoleUser {
				users = append(users, m.Content)
			}
		}
		return users
	}
	if got := strings.Join(history(c3), ","); got != "one,branch" {
		t.Errorf("branch's user messages: %s", got)
	}
	if got := strings.Join(history(c1), ","); got != "one,two" {
		t.Errorf("parent's user messages: %s", got)
	}

	// Rewind and fork through the native API.
	if code, out := call("POST", "/api/chats/"+c1+"/rewind", `{"turn": 1}`); code != 200 || !strings.Contains(out, `"messages":2`) {
		t.Errorf("rewind: %d %s", code, out)
	}
	if got := strings.Join(history(c1), ","); got != "one" {
		t.Errorf("after the rewind: %s", got)
	}
	if code, out := call("POST", "/api/chats/"+c1+"/rewind", `{"checkpoint": "`+list.Data[2].ID+`"}`); code != 200 {
		t.Errorf("forward again to turn 2's checkpoint: %d %s", code, out)
	}
	if got := strings.Join(history(c1), ","); got != "one,two" {
		t.Errorf("after going forward again: %s", got)
	}
	code, out = call("POST", "/api/chats/"+c1+"/fork", `{"turn": 2}`)
	fork := decode[map[string]string](t, out)["chat_id"]
	if code != 200 || fork == "" {
		t.Fatalf("fork: %d %s", code, out)
	}
	if got := strings.Join(history(fork), ","); got != "one,two" {
		t.Errorf("fork: %s", got)
	}
	for _, bad := range []struct{ body, want string }{
		{`{}`, "name a turn"},
		{`{"turn": 7}`, "no checkpoint of turn 7"},
		{`{"turn": "x"}`, "turn"},
		{`{"checkpoint": "abc"}`, "not 64 hex digits"},
		{`{"turn": 1, "extra": true}`, "extra"},
	} {
		if code, out := call("POST", "/api/chats/"+c1+"/rewind", bad.body); code/100 != 4 || !strings.Contains(out, bad.want) {
			t.Errorf("rewind %s: %d %s", bad.body, code, out)
		}
	}
	if code, out := call("POST", "/api/chats/nochat/fork", `{"turn": 1}`); code != 404 {
		t.Errorf("fork of an unknown chat: %d %s", code, out)
	}

	// Edit turn 2 and send it again through the native API: a second
	// version of turn 2; switching goes back to the first.
	resp, out := do(t, e.ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"`+c1+`","message":"two, edited","edit":2}`)
	if resp.StatusCode != 200 || !strings.Contains(out, "event: done") {
		t.Fatalf("edit: %d %s", resp.StatusCode, out)
	}
	if got := strings.Join(history(c1), ","); got != "one,two, edited" {
		t.Errorf("after the edit: %s", got)
	}
	code, out = call("GET", "/api/chats/"+c1+"/branches", "")
	bs := decode[struct {
		Data []checkpoint.TurnVersions `json:"data"`
	}](t, out)
	if code != 200 || len(bs.Data) != 2 || len(bs.Data[1].Versions) != 2 || bs.Data[1].Current != 1 {
		t.Fatalf("branches: %d %s", code, out)
	}
	if code, out := call("POST", "/api/chats/"+c1+"/switch", `{"turn": 2, "version": 1}`); code != 200 {
		t.Errorf("switch: %d %s", code, out)
	}
	if got := strings.Join(history(c1), ","); got != "one,two" {
		t.Errorf("after the switch to version 1: %s", got)
	}
	for _, bad := range []struct{ path, body, want string }{
		{"/switch", `{"turn": 2, "version": 3}`, "has 2 versions"},
		{"/switch", `{"turn": 2}`, "counted from 1"},
		{"/switch", `{"turn": 2, "version": 1, "x": 1}`, "x"},
	} {
		if code, out := call("POST", "/api/chats/"+c1+bad.path, bad.body); code != 400 || !strings.Contains(out, bad.want) {
			t.Errorf("%s %s: %d %s", bad.path, bad.body, code, out)
		}
	}
	resp, out = do(t, e.ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"`+c1+`","message":"x","edit":9}`)
	if resp.StatusCode != 404 || !strings.Contains(out, "before turn 9") {
		t.Errorf("edit of a turn the chat does not have: %d %s", resp.StatusCode, out)
	}
}
