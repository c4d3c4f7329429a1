package pipeline

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
	"github.com/agentbox/agentbox/scripted"
)

// TestPoolInKubernetes: on the kubernetes runtime, new chats of an
// assistant with sandbox.pool claim pods made ahead of demand, each with
// its own workspace and nothing of another chat's, relabelled as the
// chat's; a pooled pod deleted behind the pool's back is dropped on claim
// and the chat gets another; Close leaves no pod or slot behind.
func TestPoolInKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "pipeline-pool-test", PoolDir: filepath.Join(k8stest.SharedTempDir(t), "pool")})
	lookTurns := []scripted.Turn{
		{When: &scripted.Match{Contains: "look"}, ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{
			"command": "ls -A /workspace; cat /workspace/mine.txt 2>/dev/null; echo $PWD > /workspace/mine.txt; echo done"}}}},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "Looked."},
	}
	turns := append(append([]scripted.Turn{}, lookTurns...), lookTurns...)
	turns = append(turns, scripted.Turn{When: &scripted.Match{Contains: "hi"}, Text: "Hello."})
	e := newKeptEnv(t, ctx, 0, turns, func(c *Config) {
		c.Runtimes = map[string]sandbox.Runtime{rt.Name(): rt}
		c.DefaultRuntime = rt.Name()
	})
	e.coder.Sandbox.Pool = 2
	e.p.StartPool()
	waitPool(t, ctx, e.p, 2)
	var seen []string
	e.p.pool.mu.Lock()
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.ID())
	}
	e.p.pool.mu.Unlock()
	core, err := corev1client.NewForConfig(k8stest.Admin(t))
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []string{"c1", "c2"} {
		var rec chattest.Recorder
		resp, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: c, AssistantID: "coder", Messages: user("look around")}, rec.Emit)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if tm := rec.Last().Final.Timings; resp.Content != "Looked." || tm.Sandbox != chat.SandboxPooled {
			t.Fatalf("%s: %q on %s, want Looked. on a pooled sandbox", c, resp.Content, tm.Sandbox)
		}
		for _, ev := range rec.Events() {
			if out, _ := ev.Props["content"].(string); ev.Type == chat.TypeToolResult && ev.Event == chat.Start &&
				(strings.Contains(out, "mine.txt") || !strings.Contains(out, "done")) {
				t.Errorf("%s's first look: %q, want an empty workspace", c, out)
			}
		}
		ws, release, err := e.ws.Acquire(ctx, "alice", c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ws.ReadFile(ctx, "mine.txt", 100)
		release()
		if err != nil || strings.TrimSpace(string(b)) != "/workspace" {
			t.Errorf("%s's workspace holds %q, %v", c, b, err)
		}
	}
	// Each pod claimed is labelled as its chat's.
	pods, err := core.Pods(rt.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: kubernetes.LabelPool + "=" + kubernetes.PoolClaimed})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Annotations[sandbox.LabelUser] != "alice" {
			t.Errorf("claimed pod %s: user %q, want alice", p.Name, p.Annotations[sandbox.LabelUser])
		}
	}

	// A pooled pod deleted behind the pool's back is dropped on claim; the
	// chat gets the next one, or its own.
	waitPool(t, ctx, e.p, 2)
	e.p.pool.mu.Lock()
	victim := e.p.pool.ready["coder"][0].sb.ID()
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.ID())
	}
	e.p.pool.mu.Unlock()
	zero := int64(0)
	if err := core.Pods(rt.Namespace()).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := core.Pods(rt.Namespace()).Get(ctx, victim, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pod %s never went", victim)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if got, tm := e.turn(t, ctx, "c3", "hi"); got != "Hello." || tm.Sandbox != chat.SandboxPooled {
		t.Errorf("after a deleted pooled pod: %q on %s", got, tm.Sandbox)
	}
	if st := e.p.Pool(); st.Dropped != 1 || st.Claimed != 3 {
		t.Errorf("pool %+v: want 1 dropped, 3 claimed", st)
	}

	// Close removes every pooled pod and its slot.
	waitPool(t, ctx, e.p, 1)
	e.p.pool.mu.Lock()
	for _, ps := range e.p.pool.ready["coder"] {
		seen = append(seen, ps.sb.ID())
	}
	e.p.pool.mu.Unlock()
	if err := e.p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		// Deleted pods may linger through their grace period; none may
		// still be running.
		for _, name := range left {
			p, err := core.Pods(rt.Namespace()).Get(ctx, name, metav1.GetOptions{})
			if err == nil && p.DeletionTimestamp == nil {
				t.Errorf("pod %s left after Close", name)
			}
		}
	}
	for _, name := range seen {
		if _, err := os.Stat(filepath.Join(rt.PoolDir(), name)); err == nil {
			t.Errorf("slot %s left after Close", name)
		}
	}
}

// TestPoolPrimedInKubernetes: on the kubernetes runtime, a pooled pod of
// a Gemini CLI assistant waits with its CLI started once the assistant's
// first turn taught the pool how, and a new chat's turn goes to it: the
// agent's shell writes into the chat's workspace by a relative path, and
// the chat's session is kept there.
func TestPoolPrimedInKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "pipeline-prime-test", PoolDir: filepath.Join(k8stest.SharedTempDir(t), "pool")})
	turns := primedTurns("run_shell_command", map[string]any{"command": "pwd > where.txt && echo written-4411", "description": "run"})
	e := newKeptEnv(t, ctx, 0, turns, func(c *Config) {
		c.Runtimes = map[string]sandbox.Runtime{rt.Name(): rt}
		c.DefaultRuntime = rt.Name()
	})
	e.useCLI(t, benchCLI{"gemini", "anthropic"})
	e.coder.Sandbox.Pool = 1
	e.p.StartPool()
	checkPrimed(t, ctx, e, "gemini")
}
