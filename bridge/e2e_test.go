package bridge_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// realKey is the connector's key; it must never reach the sandbox.
const realKey = "sk-ant-e2e-REALKEY-7f3a9c"

func randID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestEndToEndClaudeInNetworklessSandbox runs the real Claude Code CLI in a
// hardened container with network "none" against a scripted model: the
// model calls a host tool over the bridge, the host function runs, and its
// result goes back to the model; no real key ever enters the container.
func TestEndToEndClaudeInNetworklessSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a container and the Claude CLI")
	}
	img := testenv.Image(t)
	claudeBin := testenv.ClaudeBin(t)
	bin := testenv.Agentbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__lookup_order", Input: map[string]any{"order_id": "A-17"}}}},
		{When: &scripted.Match{AfterToolResult: "mcp__agentbox__lookup_order"}, Text: "Order A-17 has shipped."},
	}})
	t.Cleanup(srv.Close)

	rt, err := docker.New(ctx, docker.Options{Instance: "test-bridge-" + randID(), Image: img})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)

	// A closed session (its token is stale) and a live one of another
	// request: neither token may work in this sandbox.
	bridgeDir := shortDir(t)
	stale, err := bridge.Start(ctx, bridge.Options{Dir: bridgeDir, Binary: bin, Upstream: executor.Connection{Type: "anthropic", Host: srv.URL, Key: realKey}})
	if err != nil {
		t.Fatal(err)
	}
	staleToken := stale.Token()
	_ = stale.Close(ctx)
	other, err := bridge.Start(ctx, bridge.Options{Dir: bridgeDir, Binary: bin, Upstream: executor.Connection{Type: "anthropic", Host: srv.URL, Key: realKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })

	var (
		sb       sandbox.Sandbox
		sbReady  = make(chan struct{})
		mu       sync.Mutex
		toolArgs []string
		probes   = map[string]string{}
	)
	probe := func(ctx context.Context, name, script string) {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"bash", "-c", script}, Timeout: 60 * time.Second})
		out := ""
		if err != nil {
			out = "exec error: " + err.Error()
		} else {
			out = res.Stdout + res.Stderr
		}
		mu.Lock()
		probes[name] = out
		mu.Unlock()
	}
	lookup := bridge.Tool{
		Name:        "lookup_order",
		Description: "Look up an order's shipping status by id.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`),
		Timeout:     90 * time.Second,
		Handler: func(ctx context.Context, args json.RawMessage) (any, error) {
			<-sbReady
			mu.Lock()
			toolArgs = append(toolArgs, string(args))
			mu.Unlock()
			// While the CLI waits for this tool, look inside the live
			// sandbox: no real key in any process's environment or argv,
			// nor in any file it can write; foreign tokens are refused.
			// The key is split in the script, so the probe's own argv does
			// not hold it; processes are scanned without grep for the same
			// reason.
			probe(ctx, "key", `k1='`+realKey[:10]+`'; k2='`+realKey[10:]+`'; k="$k1$k2"
				grep -rIlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev --exclude-dir=usr --exclude-dir=claude-host -e "$k" / 2>/dev/null
				n=0; tok=0; for p in /proc/[0-9]*; do c=$( { tr '\0' ' ' < $p/environ; tr '\0' ' ' < $p/cmdline; } 2>/dev/null); [[ "$c" == *"$k"* ]] && n=$((n+1)); [[ "$c" == *ANTHROPIC_API_KEY=agentbox-bridge-* ]] && tok=$((tok+1)); done; echo "$n $tok"`)
			request := func(tok string) string {
				return `exec 3<>/dev/tcp/127.0.0.1/` + strings.Split(bridge.GuestProxyAddr, ":")[1] + ` && printf 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ` + tok + `\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}' >&3 && head -n 1 <&3`
			}
			probe(ctx, "wrong", request("sk-ant-guessed"))
			probe(ctx, "stale", request(staleToken))
			probe(ctx, "other", request(other.Token()))
			probe(ctx, "env", `env | grep -c ANTHROPIC_API_KEY=agentbox-bridge- || true`)
			return map[string]string{"order_id": "A-17", "status": "shipped", "carrier": "host-tool"}, nil
		},
	}
	sess, err := bridge.Start(ctx, bridge.Options{
		Dir:      bridgeDir,
		Binary:   bin,
		UserID:   "u1",
		ChatID:   "c1",
		Tools:    []bridge.Tool{lookup},
		Upstream: executor.Connection{Type: "anthropic", Host: srv.URL, Key: realKey},
		Deadline: time.Now().Add(3 * time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })

	mounts := append(sess.Mounts(), sandbox.Mount{Source: claudeBin, Target: "/opt/claude-host/claude"})
	sb, err = rt.Create(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws, Image: img, Network: sandbox.NetworkNone, Mounts: mounts, Env: sess.Env()})
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	close(sbReady)

	// Prefer the image's own CLI; fall back to the host's, mounted.
	claude := "claude"
	if res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sh", "-c", "command -v claude"}}); err != nil || res.ExitCode != 0 {
		claude = "/opt/claude-host/claude"
	}
	t.Logf("CLI in the sandbox: %s", claude)
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		bridge.ServerName: map[string]any{"type": "stdio", "command": sess.MCPServer().Command, "args": sess.MCPServer().Args},
	}})
	if err := ws.WriteFile(context.Background(), ".agentbox-mcp.json", mcpConfig, 0o644); err != nil {
		t.Fatal(err)
	}
	argv := sess.WrapCommand([]string{claude, "-p", "What is the status of order A-17?",
		"--output-format", "stream-json", "--verbose",
		"--mcp-config", "/workspace/.agentbox-mcp.json", "--strict-mcp-config",
		"--allowedTools", "mcp__agentbox__lookup_order"})
	proc, err := sb.Start(ctx, sandbox.ExecRequest{Argv: argv, Timeout: 150 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	errDone := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, proc.Stderr()); close(errDone) }()
	var events []map[string]any
	sc := bufio.NewScanner(proc.Stdout())
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			events = append(events, ev)
		}
	}
	code, err := proc.Wait(ctx)
	<-errDone
	if err != nil || code != 0 {
		t.Fatalf("claude exit %d, err %v\nstderr: %s\nevents: %v", code, err, stderr.String(), events)
	}

	// The init event shows the bridge's MCP server connected.
	var connected bool
	var result map[string]any
	for _, ev := range events {
		if ev["type"] == "system" && ev["subtype"] == "init" {
			servers, _ := ev["mcp_servers"].([]any)
			for _, s := range servers {
				m, _ := s.(map[string]any)
				if m["name"] == bridge.ServerName && m["status"] == "connected" {
					connected = true
				}
			}
			if !connected {
				t.Errorf("init event mcp_servers = %v, want %s connected", ev["mcp_servers"], bridge.ServerName)
			}
		}
		if ev["type"] == "result" {
			result = ev
		}
	}
	if result == nil || result["is_error"] == true || !strings.Contains(fmt.Sprint(result["result"]), "A-17 has shipped") {
		t.Fatalf("result event = %v\nstderr: %s", result, stderr.String())
	}

	// The host function ran with the model's arguments.
	mu.Lock()
	defer mu.Unlock()
	if len(toolArgs) != 1 || !strings.Contains(toolArgs[0], `"order_id":"A-17"`) {
		t.Fatalf("host tool calls = %v", toolArgs)
	}
	// The model saw the host tool's result.
	var seen bool
	for _, r := range srv.Requests() {
		for _, tr := range r.ToolResults() {
			if tr.Tool == "mcp__agentbox__lookup_order" && strings.Contains(tr.ContentText(), `"carrier":"host-tool"`) && !tr.IsError {
				seen = true
			}
		}
		if got := r.Header.Get("X-Api-Key"); got != realKey && r.API == "anthropic" {
			t.Errorf("upstream request %s carried x-api-key %q, want the real key", r.Path, got)
		}
	}
	if !seen {
		t.Fatal("the scripted model never received the host tool's result")
	}

	// Probes from inside the sandbox.
	// "0 N": no file, no process with the key; N>0 processes hold the
	// token, which shows the scan reads what it should.
	if f := strings.Fields(probes["key"]); len(f) != 2 || f[0] != "0" || f[1] == "0" {
		t.Errorf("key probe in the sandbox: %q, want no file and \"0 N\" with N>0", probes["key"])
	}
	t.Logf("probes: %q", probes)
	if got := strings.TrimSpace(probes["env"]); got != "1" && !strings.HasPrefix(got, "1") {
		t.Errorf("sandbox env holds the bridge token: %q", got)
	}
	for _, name := range []string{"wrong", "stale", "other"} {
		if got := probes[name]; !strings.Contains(got, " 401 ") {
			t.Errorf("%s token from inside the sandbox: %q, want HTTP 401", name, got)
		}
	}

	// The proxy metered the run; the workspace holds no key.
	if u := sess.Usage(); u.InputTokens == 0 || u.OutputTokens == 0 || u.ModelCalls < 2 {
		t.Errorf("usage %+v: want tokens from at least 2 calls", u)
	}
	_ = filepath.WalkDir(ws.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(realKey)) {
				t.Errorf("workspace file %s holds the real key", p)
			}
		}
		return nil
	})
	t.Logf("usage %+v; %d events", sess.Usage(), len(events))
}

func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "abx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
