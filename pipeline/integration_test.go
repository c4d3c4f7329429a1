package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/scripted"
)

const toolHooks = `
function Create(ctx, messages, options) {
  ctx.sandbox.WriteFile("order.txt", "A-17");
  return null;
}
function LookupOrder(ctx, args) {
  return {order_id: args.order_id, status: "shipped", for: ctx.user_id, note: ctx.sandbox.ReadFile("order.txt")};
}
function Next(ctx, payload) {
  // What the sandbox's processes could see: their environment.
  return {data: ctx.sandbox.Exec(["sh", "-c", "env; cat /proc/net/dev; ls /run/agentbox 2>&1; dmesg 2>/dev/null | head -n 1; true"])};
}
`

// TestBridgedTurnInDocker runs a whole sandboxed turn (bridgedTurn) in a
// Docker sandbox.
func TestBridgedTurnInDocker(t *testing.T) {
	bridgedTurnInDocker(t, "")
}

// TestBridgedTurnInGVisor runs the turn in a Docker sandbox on gVisor's
// runsc: the CLI, its hooks' commands and the bridge's Unix sockets work
// in gVisor's kernel as in the host's.
func TestBridgedTurnInGVisor(t *testing.T) {
	testenv.GVisor(t)
	if inside := bridgedTurnInDocker(t, sandbox.IsolationGVisor); !strings.Contains(inside, "Starting gVisor") {
		t.Errorf("the hook's command did not run in gVisor:\n%s", inside)
	}
}

// bridgedTurnInDocker runs bridgedTurn on the Docker runtime with the
// isolation.
func bridgedTurnInDocker(t *testing.T, isolation string) string {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	image := testenv.Image(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{Instance: "pipeline-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return bridgedTurn(ctx, t, rt, image, nil, isolation)
}

// TestBridgedTurnInKubernetes runs the same turn in a pod of the local
// cluster: the bridge's sockets and the agentbox binary reach the pod
// through hostPath volumes (the node shares this host's file system), and
// the pod has loopback alone.
func TestBridgedTurnInKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	var reqs k8stest.Requests
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "pipeline-test", RESTConfig: reqs.Wrap(k8stest.ServiceAccount(t))})
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bridgedTurn(ctx, t, rt, k8stest.Image(), nil, "")
	// A sizing figure for the README: what one turn asks of the API server.
	counts, total := reqs.Counts()
	t.Logf("API server requests for the turn: %d %v", total, counts)
	// The turn removed its pod.
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestBridgedTurnInKubernetesOverNetwork runs the turn with the bridge
// across the network: the pod mounts no socket (only the agentbox binary),
// gets the session's credentials in its exec environment, and its relays
// reach the server's gateway over TCP with mutual TLS and the token. The
// local cluster's pod network is loopback alone, so the pod shares the
// node's network to reach the gateway on 127.0.0.1; on a real cluster the
// pod network and a NetworkPolicy allowing only the gateway do.
func TestBridgedTurnInKubernetesOverNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	var reqs k8stest.Requests
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "pipeline-test", AllowHostNetwork: true, RESTConfig: reqs.Wrap(k8stest.ServiceAccount(t))})
	gw, err := bridge.NewGateway(bridge.GatewayOptions{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gw.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	inside := bridgedTurn(ctx, t, rt, k8stest.Image(), gw, "")
	if !strings.Contains(inside, bridge.EnvCredentials+"=") {
		t.Error("the sandbox has no bridge credentials in its environment")
	}
	if strings.Contains(inside, ".sock") {
		t.Errorf("a bridge socket is mounted in the pod:\n%s", inside)
	}
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// bridgedTurn runs a whole sandboxed turn on rt the way a server does: the
// real Claude Code CLI of image in a network-less sandbox, its model
// traffic through the bridge's proxy, and a host tool implemented by a JS
// hook function, with the assistant's isolation. With gw the bridge runs
// across the network and the sandbox gets the host's network (to reach gw
// on loopback). It returns what the sandbox's processes saw (environment,
// interfaces, /run/agentbox, the first line of the kernel's log).
func bridgedTurn(ctx context.Context, t *testing.T, rt sandbox.Runtime, image string, gw *bridge.Gateway, isolation string) string {
	t.Helper()
	bin := testenv.Agentbox(t)
	const realKey = "sk-ant-real-key-never-in-sandbox"

	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{Name: "mcp__agentbox__lookup_order", Input: map[string]any{"order_id": "A-17"}}}},
		{When: &scripted.Match{AfterToolResult: "mcp__agentbox__lookup_order"}, Text: "Order A-17 has shipped."},
	}})
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	coder := &assistant.Assistant{
		ID: "coder", Dir: filepath.Join(dir, "coder"), Connector: "real",
		Sandbox: &assistant.Sandbox{Command: "claude", Image: image, Timeout: 2 * time.Minute, MemoryBytes: 1 << 30, CPUs: 1, Isolation: isolation,
			Arguments: chat.Arguments{MaxTurns: 5, PermissionMode: "bypassPermissions"}},
		Tools: []assistant.Tool{{Name: "lookup_order", Function: "LookupOrder", Description: "Look up an order",
			Parameters: []byte(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}},
		HookTimeout: 10 * time.Second,
	}
	// The model proxy holds the CLI to the assistant's token limit and model.
	maxTokens := 2048
	coder.Options.MaxTokens = &maxTokens
	src := filepath.Join(coder.Dir, "src", "index.js")
	if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte(toolHooks), 0o644); err != nil {
		t.Fatal(err)
	}
	coder.Hooks = src
	bcfg := &BridgeConfig{Binary: bin, Dir: filepath.Join(os.TempDir(), "abp")}
	if gw != nil {
		bcfg.Gateways = map[string]*bridge.Gateway{rt.Name(): gw}
		coder.Sandbox.Network = sandbox.NetworkHost
	}
	app := &assistant.App{Root: dir, Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{"real": {ID: "real", Type: "anthropic", Options: assistant.ConnectorOptions{Host: srv.URL, Key: realKey, Model: "claude-sonnet-4-5"}}},
		Assistants: map[string]*assistant.Assistant{"coder": coder},
	}

	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 1000, 1000
	}
	ws, err := sandbox.NewWorkspaces(filepath.Join(dir, "data"), uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		App: Static{App: app}, Runtimes: map[string]sandbox.Runtime{rt.Name(): rt}, DefaultRuntime: rt.Name(),
		Workspaces: ws, Bridge: bcfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	var rec chattest.Recorder
	resp, err := p.Chat(ctx, &Request{UserID: "alice", ChatID: "orders", AssistantID: "coder", Messages: user("Where is order A-17?")}, rec.Emit)
	if err != nil {
		t.Fatalf("turn: %v (events %+v)", err, rec.Events())
	}

	// The host tool ran in the hooks with the request's user and sandbox.
	var toolResult string
	for _, e := range rec.Events() {
		if e.Type == chat.TypeToolResult && e.Event == chat.Start {
			toolResult, _ = e.Props["content"].(string)
		}
	}
	for _, want := range []string{`"status":"shipped"`, `"for":"alice"`, `"note":"A-17"`} {
		if !strings.Contains(toolResult, want) {
			t.Errorf("tool result %q lacks %s", toolResult, want)
		}
	}
	// The model got the result; upstream saw the real key, never the token.
	reqs := srv.TurnRequests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "shipped") {
		t.Fatalf("model requests = %d; the second must carry the tool result", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("X-Api-Key"); got != realKey {
			t.Errorf("upstream x-api-key = %q, want the real key", got)
		}
	}
	for _, r := range srv.Requests() {
		if r.API != "anthropic" {
			continue
		}
		var b struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.Unmarshal(r.Body, &b); err != nil || b.Model != "claude-sonnet-4-5" || b.MaxTokens > maxTokens || b.MaxTokens == 0 {
			t.Errorf("upstream request with model %q, max_tokens %d (%v): want the assistant's model and at most %d", b.Model, b.MaxTokens, err, maxTokens)
		}
	}
	// Inside the sandbox: no real key, and no network but loopback.
	inside, _ := resp.Data.(string)
	if inside == "" {
		t.Fatal("Next hook returned nothing")
	}
	if strings.Contains(inside, realKey) {
		t.Error("the real key is visible inside the sandbox")
	}
	if gw == nil && strings.Contains(inside, "eth0") {
		t.Errorf("sandbox has a network interface besides loopback:\n%s", inside)
	}
	var streamed chat.Collector
	for _, e := range rec.Events() {
		streamed.Add(e)
	}
	if resp.Usage.InputTokens == 0 || !strings.Contains(streamed.Text(), "Order A-17 has shipped.") {
		t.Errorf("usage = %+v, streamed text = %q", resp.Usage, streamed.Text())
	}
	if resp.Content != inside {
		t.Error("the Next hook's data did not replace the response")
	}
	return inside
}
