package clitest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// RealKey is the upstream key of Docker runs: it must never reach a
// sandbox (CheckNoSecret on the workspace and the events).
const RealKey = "sk-e2e-REALKEY-5d1c9a"

// turnTimeout bounds one turn of a real CLI in the scenarios, and their
// deadlines are counted in turns: generous, for a machine busy with the
// rest of the suite, where opencode alone takes half a minute from its
// start to its first model call. Only a hung turn reaches them.
const turnTimeout = 5 * time.Minute

// Docker runs turns of a CLI executor as the product does: in its image,
// with network none, the model reached through the bridge's model proxy
// (the scripted server upstream, with RealKey) and the host tools through
// the bridge's MCP server.
type Docker struct {
	t     testing.TB
	img   string
	exec  executor.Executor
	srv   *scripted.Server
	typ   string
	tools []bridge.Tool
	rt    sandbox.Runtime
	wss   *sandbox.Workspaces
	bin   string
	dir   string
	// Approve and PermissionAsk are the turns' executor.Request's.
	Approve       executor.Approver
	PermissionAsk []string
}

// NewDocker prepares Docker runs of exec in the image of cli against srv,
// whose connector has type typ ("anthropic" or "openai").
func NewDocker(t testing.TB, ctx context.Context, cli string, exec executor.Executor, srv *scripted.Server, typ string, tools ...bridge.Tool) *Docker {
	t.Helper()
	img := testenv.CLIImage(t, cli)
	bin := testenv.Agentbox(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	rt, err := docker.New(ctx, docker.Options{Instance: cli + "-e2e-" + hex.EncodeToString(b), Image: img})
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
	// Unix socket paths are short: the bridge's folder is under /tmp.
	dir, err := os.MkdirTemp("", "abx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return &Docker{t: t, img: img, exec: exec, srv: srv, typ: typ, tools: tools, rt: rt, wss: wss, bin: bin, dir: dir}
}

// open makes the sandbox of a turn of chat chatID, on the chat's
// workspace, with a bridge session of its own; close gives them back.
func (d *Docker) open(ctx context.Context, chatID string) (sb sandbox.Sandbox, sess *bridge.Session, close func()) {
	t := d.t
	t.Helper()
	ws, release, err := d.wss.Acquire(ctx, "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	sess, err = bridge.Start(ctx, bridge.Options{
		Dir: d.dir, Binary: d.bin, UserID: "alice", ChatID: chatID, Tools: d.tools,
		Upstream:     executor.Connection{Type: d.typ, Host: d.srv.URL, Key: RealKey, Model: "test-model"},
		UpstreamAuth: map[bool]string{true: bridge.AuthBearer, false: bridge.AuthAPIKey}[d.typ == "openai"],
		Deadline:     time.Now().Add(30 * time.Minute),
	})
	if err != nil {
		release()
		t.Fatal(err)
	}
	sb, err = d.rt.Create(ctx, sandbox.Spec{UserID: "alice", ChatID: chatID, Workspace: ws, Image: d.img,
		Network: sandbox.NetworkNone, Mounts: sess.Mounts()})
	if err != nil {
		_ = sess.Close(context.Background())
		release()
		t.Fatal(err)
	}
	close = func() {
		_ = sb.Remove(context.Background())
		_ = sess.Close(context.Background())
		release()
	}
	if err := sess.SetLimits(bridge.Limits{Model: sess.Connection().Model}); err != nil {
		close()
		t.Fatal(err)
	}
	return sb, sess, close
}

// Turn runs one turn of chat chatID in a fresh sandbox on the chat's
// workspace and returns its result, events and workspace.
func (d *Docker) Turn(ctx context.Context, a *assistant.Assistant, chatID, input string, args chat.Arguments, history ...chat.Message) (*executor.Result, *chattest.Recorder, *sandbox.Workspace, error) {
	t := d.t
	t.Helper()
	sb, sess, close := d.open(ctx, chatID)
	defer close()
	ws, conn := sb.Workspace(), sess.Connection()
	req := &executor.Request{
		Assistant: a, UserID: "alice", ChatID: chatID,
		System:    "You are a careful coding assistant.",
		History:   history,
		Input:     []chat.Message{{Role: chat.RoleUser, Content: input}},
		Connector: conn, Arguments: args,
		Sandbox: sb, Timeout: turnTimeout,
		WrapArgv: sess.WrapCommand, Relay: bridge.GuestBinary,
		Approve: d.Approve, PermissionAsk: d.PermissionAsk,
	}
	if m := sess.MCPServer(); m.Command != "" {
		req.MCPServers = map[string]assistant.MCPServer{bridge.ServerName: m}
	}
	log := &chattest.Recorder{}
	req.Emit = log.Emit
	res, err := d.exec.Run(ctx, req)
	chattest.Check(t, log.Events())
	CheckNoSecret(t, RealKey, ws.Dir(), log)
	return res, log, ws, err
}
