package docker_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

// TestPoolClaim: a container made ahead of demand is claimed for a chat:
// its workspace (with a hidden folder), a socket under PoolSocketDir and
// its environment appear in it; it serves one claim; its removal leaves no
// mount, folder or container behind, and the workspace's files stay.
func TestPoolClaim(t *testing.T) {
	testenv.Root(t, "to attach a workspace to a running container")
	rt, _ := newRuntimeIn(t)
	ctx := context.Background()
	pooled, err := rt.Prestart(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pooled.Remove(context.Background()) })

	ws := chatWorkspace(t)
	if err := ws.WriteFile(ctx, "hello.txt", []byte("from the chat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ws.MkdirAll(ctx, ".claude"); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteFile(ctx, ".claude/settings.json", []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	sockDir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(sockDir, "model.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_ = os.Chmod(filepath.Join(sockDir, "model.sock"), 0o666)
	accepted := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			close(accepted)
		}
	}()

	spec := sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws, Hide: []string{".claude/"},
		Env:    map[string]string{"CHAT_VAR": "c1"},
		Mounts: []sandbox.Mount{{Source: filepath.Join(sockDir, "model.sock"), Target: sandbox.PoolSocketDir + "/model.sock", Writable: true}}}
	sb, err := pooled.Claim(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	if _, err := pooled.Claim(ctx, spec); !errors.Is(err, sandbox.ErrNotPoolable) {
		t.Errorf("second claim: %v, want ErrNotPoolable", err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{`cat hello.txt; ls -A .claude; echo "var=$CHAT_VAR"; touch made-here; ` +
		`node -e 'require("net").connect("/run/agentbox/model.sock").on("connect",()=>{console.log("connected");process.exit(0)}).on("error",e=>{console.log(e.message);process.exit(1)})' 2>&1 || ` +
		`python3 -c 'import socket;s=socket.socket(socket.AF_UNIX);s.connect("/run/agentbox/model.sock");print("connected")'`}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "from the chat\nvar=c1\nconnected\n"
	if res.Stdout != want || res.ExitCode != 0 {
		t.Errorf("in the claimed sandbox: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	<-accepted
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := ws.ReadFile(ctx, ".claude/settings.json", 100); err != nil || string(b) != "secret" {
		t.Errorf("hidden file on the host: %q, %v", b, err)
	}
	if _, err := ws.Lstat(ctx, "made-here"); err != nil {
		t.Errorf("file made in the sandbox: %v", err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), pooled.(*docker.Pooled).Name()) {
		t.Errorf("slot still mounted after Remove")
	}
	if _, err := os.Stat(filepath.Join(rt.PoolDir(), pooled.(*docker.Pooled).Name())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slot folder after Remove: %v", err)
	}
}

// TestPoolRefuses: a pooled container refuses a claim with a mount it was
// not made with, and a gVisor spec is not pooled.
func TestPoolRefuses(t *testing.T) {
	testenv.Root(t, "to attach a workspace to a running container")
	rt, _ := newRuntimeIn(t)
	ctx := context.Background()
	if _, err := rt.Prestart(ctx, sandbox.Spec{Isolation: sandbox.IsolationGVisor}); !errors.Is(err, sandbox.ErrNotPoolable) {
		t.Errorf("gVisor prestart: %v, want ErrNotPoolable", err)
	}
	pooled, err := rt.Prestart(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pooled.Remove(context.Background()) })
	ws := chatWorkspace(t)
	_, err = pooled.Claim(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws,
		Mounts: []sandbox.Mount{{Source: t.TempDir(), Target: "/opt/other"}}})
	if !errors.Is(err, sandbox.ErrNotPoolable) {
		t.Errorf("claim with another mount: %v, want ErrNotPoolable", err)
	}
	if err := pooled.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Prestart(ctx, sandbox.Spec{UserID: "u1", ChatID: "../c1"}); err == nil || !strings.Contains(err.Error(), "chat") {
		t.Errorf("prestart for a bad chat id: %v, want its refusal", err)
	}
}

// TestPrestartForChat: a container started for a chat before its
// workspace is made (the cold path) carries the chat's labels.
func TestPrestartForChat(t *testing.T) {
	testenv.Root(t, "to attach a workspace to a running container")
	rt, _ := newRuntimeIn(t)
	ctx := context.Background()
	pooled, err := rt.Prestart(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pooled.Remove(context.Background()) })
	ins, err := rt.Client().ContainerInspect(ctx, pooled.ID())
	if err != nil {
		t.Fatal(err)
	}
	if l := ins.Config.Labels; l[sandbox.LabelUser] != "u1" || l[sandbox.LabelChat] != "c1" {
		t.Errorf("labels %v: want user u1 and chat c1", l)
	}
	sb, err := pooled.Claim(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: chatWorkspace(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
}

// chatWorkspace is a fresh workspace of chat c1, acquired for the test.
func chatWorkspace(t *testing.T) *sandbox.Workspace {
	t.Helper()
	wss, err := sandbox.NewWorkspaces(t.TempDir(), 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return ws
}

// newRuntimeIn is newRuntime with a pool folder of the test's own.
func newRuntimeIn(t *testing.T) (*docker.Runtime, string) {
	t.Helper()
	img := testenv.Image(t)
	rt, err := docker.New(context.Background(), docker.Options{Instance: "test-" + randID(), Image: img, PoolDir: t.TempDir()})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt, img
}
