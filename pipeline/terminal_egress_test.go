package pipeline

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge/egress/egresstest"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
	"github.com/agentbox/agentbox/store"
)

// TestTerminalEgress: the terminal of an assistant with a network allow
// list gets the same policy as its turns: an allowed host answers through
// the egress proxy, any other is refused, and a secret goes into its
// credential header only and never comes back, whatever a user types. A
// chat that belongs to one assistant gets no terminal of another.
func TestTerminalEgress(t *testing.T) {
	testenv.Bwrap(t)
	testenv.Tool(t, "curl")
	// The sandbox user must reach the bridge binary: a copy in a folder it
	// may enter.
	binDir, err := os.MkdirTemp("", "abt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	b, err := os.ReadFile(testenv.Agentbox(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(binDir, "agentbox")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(binDir, 0o755)
	pki := egresstest.NewPKI(t)
	const secret = "tok_TERMINALsecret_38d1e0a7"
	t.Setenv("AB_TERM_TOKEN", secret)
	srv := egresstest.NewServer(t, pki, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/echo/") {
			egresstest.Echo(w, r)
			return
		}
		_, _ = io.WriteString(w, "hello-from-api\n")
	}), "api.test")

	dir := t.TempDir()
	for p := dir; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	files := map[string]string{
		"connectors/m.conn.yao": `{"type": "anthropic", "options": {"host": "http://127.0.0.1:9", "key": "k", "model": "m"}}`,
		"app.jsonc":             `{"data_root": "data", "sandbox": {"runtime": "local"}}`,
		"assistants/coder/package.yao": `{"connector": "m", "sandbox": {"command": "claude",
			"network": {"allow": ["` + srv.Addr("api.test") + `"], "hosts": {"api.test": "127.0.0.1"}},
			"secrets": {"API_TOKEN": {"value": "$ENV.AB_TERM_TOKEN", "hosts": ["` + srv.Addr("api.test") + `"]}}}}`,
		"assistants/open/package.yao": `{"connector": "m", "sandbox": {"command": "claude", "network": "host"}}`,
	}
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
	rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	wss, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(dir, "data", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bdir, err := os.MkdirTemp("", "abb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bdir) })
	p, err := New(Config{App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{"local": rt}, DefaultRuntime: "local",
		Workspaces: wss, History: st, Memory: StoreMemory(st),
		Bridge: &BridgeConfig{Binary: bin, Dir: bdir, EgressRootCAs: pki.Pool()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(ctx) })

	if _, err := st.ClaimChat(ctx, "u", "c", "coder"); err != nil {
		t.Fatal(err)
	}
	var ce *chat.Error
	if _, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c", AssistantID: "open"}); !asChatError(err, &ce) || ce.Code != chat.ErrChatAssistant {
		t.Fatalf("another assistant's terminal: %v", err)
	}
	term, err := p.OpenTerminal(ctx, TerminalRequest{UserID: "u", ChatID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if term.AssistantID != "coder" {
		t.Errorf("terminal of %q, want the chat's coder", term.AssistantID)
	}
	var out testenv.SyncBuffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&out, term); close(copied) }()
	script := "curl -sS " + srv.URL("api.test") + "/; curl -sS -A \"$API_TOKEN\" " + srv.URL("api.test") + "/echo/plain; " +
		"curl -sS -i --compressed -H \"Authorization: Bearer $API_TOKEN\" " + srv.URL("api.test") + "/echo/gzip; " +
		"curl -sS https://example.com/ 2>&1; echo \"end-$((1+1))\"; exit\n"
	if _, err := io.WriteString(term, script); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := term.Wait(wctx); err != nil {
		t.Fatalf("wait: %v\n%s", err, out.String())
	}
	<-copied
	s := out.String()
	if !strings.Contains(s, "hello-from-api") || !strings.Contains(s, "403") || !strings.Contains(s, "end-2") {
		t.Errorf("the allowed host answers and the other is refused; the terminal printed:\n%s", s)
	}
	if !strings.Contains(s, "placeholder of secret API_TOKEN in the User-Agent header") || !strings.Contains(s, `"Authorization":["Bearer ****`) {
		t.Errorf("the secret in User-Agent is refused and its echo in Authorization masked; the terminal printed:\n%s", s)
	}
	if l := egresstest.Leaks(secret, s); len(l) > 0 {
		t.Errorf("the value came back to the terminal (%v):\n%s", l, s)
	}
	got := false
	for _, r := range srv.Requests() {
		got = got || r.Header.Get("Authorization") == "Bearer "+secret
	}
	if !got {
		t.Error("the host never got the value")
	}
}

func asChatError(err error, target **chat.Error) bool {
	e, ok := err.(*chat.Error)
	if ok {
		*target = e
	}
	return ok
}
