// Package previews tests the previews of sandbox ports end to end: a real
// `agentbox serve` with Docker sandboxes, Claude Code driven by a scripted
// model that starts a Python HTTP server and a WebSocket echo server in a
// kept chat, and real HTTP and WebSocket clients reaching them through
// their preview URLs.
package previews

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/scripted"
)

// wsEcho is a WebSocket echo server in Python's standard library (the
// sandbox image has python3, not the websockets package): RFC 6455's
// handshake and text/binary frames, echoed.
const wsEcho = `import base64, hashlib, socket, struct, sys, threading
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
def recvn(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d: raise EOFError
        b += d
    return b
def serve(c):
    req = b""
    while b"\r\n\r\n" not in req:
        d = c.recv(4096)
        if not d: return
        req += d
    keys = [l.split(b":", 1)[1].strip() for l in req.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")]
    if not keys:
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nws-echo")
        c.close()
        return
    key = keys[0]
    acc = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acc + b"\r\n\r\n")
    try:
        while True:
            h = recvn(c, 2)
            op, n = h[0] & 0x0F, h[1] & 0x7F
            if n == 126: n = struct.unpack(">H", recvn(c, 2))[0]
            elif n == 127: n = struct.unpack(">Q", recvn(c, 8))[0]
            mask = recvn(c, 4) if h[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(recvn(c, n)))
            if op == 8:
                c.sendall(b"\x88\x00"); return
            hdr = bytes([0x80 | op])
            if len(data) < 126: hdr += bytes([len(data)])
            elif len(data) < 65536: hdr += bytes([126]) + struct.pack(">H", len(data))
            else: hdr += bytes([127]) + struct.pack(">Q", len(data))
            c.sendall(hdr + data)
    except EOFError:
        pass
    finally:
        c.close()
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// agentPorts are the agent's servers' ports: the site and the WebSocket echo
// server, declared, and another one, not declared.
type agentPorts struct{ site, ws, other int }

// sandboxPorts are the ports of a sandbox with a network of its own.
var sandboxPorts = agentPorts{8000, 8765, 9000}

// start is what the agent runs: the two declared servers and one on an
// undeclared port, in the background, and a large file to serve.
func (p agentPorts) start() string {
	return fmt.Sprintf(`cd /workspace && printf '<h1>preview-ok-4711</h1>' > index.html && head -c 33554432 /dev/zero > big.bin && `+
		`(nohup python3 -m http.server %d --bind 127.0.0.1 > http.log 2>&1 &) && `+
		`(nohup python3 ws_echo.py %d > ws.log 2>&1 &) && `+
		`(nohup python3 -m http.server %d --bind 127.0.0.1 > other.log 2>&1 &) && sleep 2 && echo started`, p.site, p.ws, p.other)
}

// newApp writes an app in dir whose assistant "web" runs Claude Code in a
// kept sandbox (app.jsonc's sandbox block: runtime and images, and
// assistantSandbox added to the assistant's) that declares ports p.site
// and p.ws.
func newApp(t *testing.T, dir, sandboxBlock, assistantSandbox string, p agentPorts) string {
	t.Helper()
	app := filepath.Join(dir, "app")
	t.Cleanup(func() { e2etest.UnmountUnder(t, app) })
	e2etest.Write(t, filepath.Join(app, "app.jsonc"), fmt.Sprintf(`{"data_root": "./data", %s,
  "sandbox": %s}`, e2etest.AuthJSONC, sandboxBlock))
	e2etest.Write(t, filepath.Join(app, "connectors", "model.conn.yao"),
		`{"label": "scripted", "type": "anthropic", "options": {"host": "$ENV.E2E_HOST", "key": "sk-previews", "model": "claude-sonnet-4-5"}}`)
	e2etest.Write(t, filepath.Join(app, "assistants", "web", "package.yao"), `{
  "name": "Web", "connector": "model",
  "sandbox": {"command": "claude", "keep_alive": "5m",`+assistantSandbox+`
    "ports": [{"port": `+fmt.Sprint(p.site)+`, "label": "site"}, `+fmt.Sprint(p.ws)+`],
    "arguments": {"permission_mode": "acceptEdits", "allowed_tools": ["Bash"]}}
}`)
	e2etest.Write(t, filepath.Join(app, "assistants", "web", "prompts.yml"), "- role: system\n  content: You build web apps.\n")
	return app
}

type portInfo struct {
	Port  int    `json:"port"`
	Label string `json:"label"`
	State string `json:"state"`
	URL   string `json:"url"`
}

func ports(t *testing.T, srv *e2etest.Server, token, chatID string) []portInfo {
	t.Helper()
	code, body := srv.Send(t, http.MethodGet, "/api/chats/"+chatID+"/ports", token, "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET ports: %d %s", code, body)
	}
	var list struct {
		Data []portInfo `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	return list.Data
}

// browser is an HTTP client with a cookie jar that resolves every preview
// host to the server's loopback address, as browsers resolve *.localhost.
func browser(srv *e2etest.Server) *http.Client {
	jar, _ := cookiejar.New(nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	return &http.Client{Jar: jar, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// poolHealth is GET /health's pool.
type poolHealth struct {
	Ready   int `json:"ready"`
	Claimed int `json:"claimed"`
	Cold    int `json:"cold"`
	Dropped int `json:"dropped"`
}

func pool(t *testing.T, srv *e2etest.Server) poolHealth {
	t.Helper()
	_, body := get(t, http.DefaultClient, srv.URL+"/health")
	var h struct {
		Pool poolHealth `json:"pool"`
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("GET /health: %v: %s", err, body)
	}
	return h.Pool
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestPreviewsOfAKeptChat: previews of a kept chat's Docker sandbox.
func TestPreviewsOfAKeptChat(t *testing.T) {
	testenv.Docker(t)
	img := testenv.CLIImage(t, "claude")
	previewsOfAKeptChat(t, newApp(t, t.TempDir(), fmt.Sprintf(`{"runtime": "docker", "images": {"claude": %q}}`, img), "", sandboxPorts), sandboxPorts, false)
}

// TestPreviewsOnKubernetes: the same on the kubernetes runtime, the chat's
// pod claimed from a warm pool of one: the port relay's socket reaches the
// pod through the pool slot, and the preview's traffic goes through the
// server into the pod's own loopback-only network. The app's data root
// is in the local cluster's shared folder (its workspace disks are
// mounts, which must reach the node), as is the pool's folder.
func TestPreviewsOnKubernetes(t *testing.T) {
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	dir := k8stest.SharedTempDir(t)
	block := fmt.Sprintf(`{"runtime": "kubernetes", "images": {"claude": %q}, "kubernetes": {
    "kubeconfig": %q, "image_pull_policy": "Never", "pool_dir": %q}}`,
		k8stest.Image(), k8stest.ServiceAccountKubeconfig(t), filepath.Join(dir, "pool"))
	app := newApp(t, dir, block, ` "pool": 1,`, sandboxPorts)
	previewsOfAKeptChat(t, app, sandboxPorts, true)
}

// TestPreviewsOnKubernetesOverNetwork: the same with the bridge across
// the network (bridge_listen): the pod mounts no socket, and its port
// relay dials the gateway's ports channel with mutual TLS and the
// session's token. The local cluster's pods have loopback only, so the
// pod shares the node's network to reach the gateway on 127.0.0.1, and
// the agent's servers take free ports of this host.
func TestPreviewsOnKubernetesOverNetwork(t *testing.T) {
	dir := k8stest.SharedTempDir(t)
	block := fmt.Sprintf(`{"runtime": "kubernetes", "network": "host", "images": {"claude": %q}, "kubernetes": {
    "kubeconfig": %q, "image_pull_policy": "Never", "allow_host_network": true, "bridge_listen": "127.0.0.1:0"}}`,
		k8stest.Image(), k8stest.ServiceAccountKubeconfig(t))
	p := agentPorts{freePort(t), freePort(t), freePort(t)}
	previewsOfAKeptChat(t, newApp(t, dir, block, "", p), p, false)
}

// freePort is a loopback port free at the time of the call.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// previewsOfAKeptChat: a sandboxed agent starts a Python HTTP server and
// a WebSocket echo server in a kept chat of app; real HTTP and WebSocket
// clients reach them through their preview URLs; another user, a bad
// ticket and an undeclared port are refused; after the chat ends the URL
// answers with the ended page. With pooled, the assistant has a warm pool
// of one, and the chat's sandbox must come from it (GET /health says so).
func previewsOfAKeptChat(t *testing.T, app string, p agentPorts, pooled bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	model := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{Contains: "start the servers"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": p.start()}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Servers started."},
		{When: &scripted.Match{Contains: "still up"}, Text: "Yes."},
	}})
	t.Cleanup(model.Close)
	srv := e2etest.Serve(t, app, e2etest.Options{Env: append(e2etest.TokenEnv(), "E2E_HOST="+model.URL)})
	const chatID = "chat-previews-1"
	alice, bob := e2etest.TokenAlice, e2etest.TokenBob

	// The WebSocket server's script goes in before the first turn.
	if code, body := srv.Send(t, http.MethodPut, "/api/chats/"+chatID+"/files?path=ws_echo.py", alice, "text/x-python", strings.NewReader(wsEcho)); code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}
	if pooled {
		e2etest.WaitUntil(t, 2*time.Minute, "a pooled sandbox", func() bool { return pool(t, srv).Ready == 1 })
	}
	r := srv.Chat(ctx, alice, "web", chatID, "Please start the servers.")
	if r.Err != nil || r.Status != http.StatusOK || r.Final() == nil {
		t.Fatalf("turn: %d %v %s", r.Status, r.Err, r.Body)
	}
	if st := pool(t, srv); pooled && st.Claimed != 1 {
		t.Errorf("GET /health's pool: %+v, want the chat's sandbox claimed from it", st)
	}
	opened := map[float64]bool{}
	for _, e := range r.Events {
		if e.Type == "port_opened" && e.Event == chat.Start {
			p, _ := e.Props["port"].(float64)
			opened[p] = true
		}
	}
	if !opened[float64(p.site)] || !opened[float64(p.ws)] || opened[float64(p.other)] {
		t.Errorf("port_opened events for %v, want %d and %d (not the undeclared %d)", opened, p.site, p.ws, p.other)
	}

	// The turn is over: the servers it started stay up in the kept chat.
	var list []portInfo
	e2etest.WaitUntil(t, time.Minute, "both ports listening", func() bool {
		list = ports(t, srv, alice, chatID)
		return len(list) == 2 && list[0].State == "listening" && list[1].State == "listening"
	})
	if list[0].Port != p.site || list[0].Label != "site" || list[1].Port != p.ws {
		t.Fatalf("ports %+v", list)
	}
	site, ws := list[0].URL, list[1].URL
	su, _ := url.Parse(site)
	if !strings.HasSuffix(su.Hostname(), ".preview.localhost") {
		t.Fatalf("preview URL %s: want a host of its own under preview.localhost", site)
	}
	origin := su.Scheme + "://" + su.Host

	b := browser(srv)
	if code, body := get(t, b, site); code != http.StatusOK || !strings.Contains(body, "preview-ok-4711") {
		t.Fatalf("GET %s: %d %q", site, code, body)
	}
	// A large body, streamed.
	if code, body := get(t, b, origin+"/big.bin"); code != http.StatusOK || len(body) != 32<<20 {
		t.Fatalf("GET big.bin: %d, %d bytes", code, len(body))
	}
	// WebSocket: the echo server's preview takes its ticket on a plain
	// GET; the cookie it becomes opens the WebSocket.
	wu, _ := url.Parse(ws)
	if code, body := get(t, b, ws); code != http.StatusOK || body != "ws-echo" {
		t.Fatalf("GET %s: %d %q", ws, code, body)
	}
	conn, _, err := websocket.Dial(ctx, "ws://"+wu.Host+"/echo", &websocket.DialOptions{HTTPClient: b})
	if err != nil {
		t.Fatalf("websocket: %v", err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	for _, msg := range []string{"hello", strings.Repeat("x", 200000)} {
		if err := conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, got, err := conn.Read(ctx); err != nil || string(got) != msg {
			t.Fatalf("echo of %d bytes: %d bytes, %v", len(msg), len(got), err)
		}
	}
	conn.Close(websocket.StatusNormalClosure, "")

	// Refused: bob (his list of alice's chat is empty; alice's preview
	// without her cookie is 403), a bad ticket, an undeclared port.
	if l := ports(t, srv, bob, chatID); len(l) != 0 {
		t.Errorf("bob lists alice's ports: %+v", l)
	}
	if code, _ := get(t, browser(srv), origin+"/"); code != http.StatusForbidden {
		t.Errorf("no cookie: %d, want 403", code)
	}
	bad := *su
	q := bad.Query()
	q.Set("agentbox_preview_ticket", "x"+q.Get("agentbox_preview_ticket"))
	bad.RawQuery = q.Encode()
	if code, _ := get(t, browser(srv), bad.String()); code != http.StatusForbidden {
		t.Errorf("bad ticket: %d, want 403", code)
	}
	for _, l := range list {
		if l.Port == p.other {
			t.Errorf("the undeclared port %d has a preview", p.other)
		}
	}
	if code, _ := get(t, browser(srv), "http://aaaaaaaaaaaaaaaaaaaaaaaaaa.preview.localhost:"+su.Port()+"/"); code != http.StatusNotFound {
		t.Errorf("a made-up preview: %d, want 404", code)
	}

	// Between turns: an idle kept chat is frozen after 5 s, unless it
	// serves previews, which must answer while its user looks at them.
	time.Sleep(7 * time.Second)
	if code, body := get(t, b, origin+"/"); code != http.StatusOK || !strings.Contains(body, "preview-ok-4711") {
		t.Fatalf("between turns: %d %q", code, body)
	}

	// A later turn: the server is still there, the URL still serves.
	if r := srv.Chat(ctx, alice, "web", chatID, "Is it still up?"); r.Err != nil || r.Status != http.StatusOK {
		t.Fatalf("second turn: %d %v %s", r.Status, r.Err, r.Body)
	}
	if code, body := get(t, b, origin+"/"); code != http.StatusOK || !strings.Contains(body, "preview-ok-4711") {
		t.Fatalf("after the second turn: %d %q", code, body)
	}

	// The chat ends: the preview says so.
	if code, body := srv.Send(t, http.MethodPost, "/api/chats/"+chatID+"/cancel", alice, "", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, body)
	}
	code, body := get(t, b, origin+"/")
	if code != http.StatusGone || !strings.Contains(body, "Preview ended") {
		t.Fatalf("after the chat ended: %d %q", code, body)
	}
	if l := ports(t, srv, alice, chatID); len(l) != 0 {
		t.Errorf("an ended chat lists %+v", l)
	}
}
