package kubernetes_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// poolRuntime is a runtime whose pool folder is under the local cluster's
// shared folder, whose mounts reach the node.
func poolRuntime(t *testing.T, instance string) *kubernetes.Runtime {
	t.Helper()
	testenv.Root(t, "to attach a workspace to a running pod")
	return k8stest.Runtime(t, kubernetes.Options{Instance: instance, PoolDir: filepath.Join(k8stest.SharedTempDir(t), "pool")})
}

// TestPoolClaim: a pod made ahead of demand is claimed for a chat: its
// workspace (with a hidden folder), a socket under PoolSocketDir and its
// environment appear in it; it is relabelled with the chat's user and
// chat; it serves one claim; its removal leaves no pod, mount or folder
// behind, and the workspace's files stay. The claim checks the pod in
// its process's mount table (the server on the node) or, where that is
// not seen, through an exec.
func TestPoolClaim(t *testing.T) {
	rt := poolRuntime(t, "pool-claim")
	for _, byExec := range []bool{false, true} {
		t.Run(map[bool]string{false: "mount table", true: "exec"}[byExec], func(t *testing.T) {
			poolClaim(t, rt, byExec)
		})
	}
}

func poolClaim(t *testing.T, rt *kubernetes.Runtime, byExec bool) {
	ctx := context.Background()
	pooled, err := rt.Prestart(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pooled.Remove(context.Background()) })
	if byExec {
		pooled.(*kubernetes.Pooled).CheckByExec()
	} else if pooled.(*kubernetes.Pooled).HostPid() == 0 {
		t.Fatal("the pod's process is not seen on this host, the local cluster's node")
	}
	core := admin(t)
	pod, err := core.Pods(rt.Namespace()).Get(ctx, pooled.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Labels[kubernetes.LabelPool]; got != kubernetes.PoolReady {
		t.Errorf("pooled pod's %s = %q, want %q", kubernetes.LabelPool, got, kubernetes.PoolReady)
	}

	chat := "c-" + randID()
	ws, release, err := workspaces(t).Acquire(ctx, "u1", chat)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	for name, data := range map[string]string{"hello.txt": "from the chat\n", ".claude/settings.json": "secret"} {
		if err := ws.MkdirAll(ctx, filepath.Dir(name)); err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteFile(ctx, name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sockDir := t.TempDir()
	_ = os.Chmod(sockDir, 0o755)
	sock := filepath.Join(sockDir, "model.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_ = os.Chmod(sock, 0o666)
	accepted := make(chan struct{})
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			close(accepted)
		}
	}()

	spec := sandbox.Spec{UserID: "u1", ChatID: chat, Workspace: ws, Hide: []string{".claude/"},
		Env:    map[string]string{"CHAT_VAR": chat},
		Mounts: []sandbox.Mount{{Source: sock, Target: sandbox.PoolSocketDir + "/model.sock", Writable: true}}}
	sb, err := pooled.Claim(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	if _, err := pooled.Claim(ctx, spec); !errors.Is(err, sandbox.ErrNotPoolable) {
		t.Errorf("second claim: %v, want ErrNotPoolable", err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{`cat hello.txt; ls -A .claude; echo "var=$CHAT_VAR"; touch made-here; ` +
		`node -e 'require("net").connect("/run/agentbox/model.sock").on("connect",()=>{console.log("connected");process.exit(0)}).on("error",e=>{console.log(e.message);process.exit(1)})'`}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "from the chat\nvar=" + chat + "\nconnected\n"; res.Stdout != want || res.ExitCode != 0 {
		t.Errorf("in the claimed sandbox: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	<-accepted
	pod, err = core.Pods(rt.Namespace()).Get(ctx, pooled.ID(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Labels[kubernetes.LabelPool] != kubernetes.PoolClaimed || pod.Labels[sandbox.LabelChat] != chat || pod.Annotations[sandbox.LabelUser] != "u1" {
		t.Errorf("claimed pod's labels %v, annotations %v: want %s=%s and the chat's", pod.Labels, pod.Annotations, kubernetes.LabelPool, kubernetes.PoolClaimed)
	}

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
	if strings.Contains(string(mounts), pooled.ID()) {
		t.Errorf("slot still mounted after Remove")
	}
	if _, err := os.Stat(filepath.Join(rt.PoolDir(), pooled.ID())); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("slot folder after Remove: %v", err)
	}
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestPoolClaimChecks: a pooled pod that is gone, or taken by another
// server, fails its claim, and the chat's workspace does not stay mounted
// for it; an unclaimed one is removed with its slot.
func TestPoolClaimChecks(t *testing.T) {
	rt := poolRuntime(t, "pool-checks")
	ctx := context.Background()
	core := admin(t)
	take := func(t *testing.T) sandbox.Pooled {
		pooled, err := rt.Prestart(ctx, sandbox.Spec{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pooled.Remove(context.Background()) })
		return pooled
	}
	claim := func(t *testing.T, pooled sandbox.Pooled) error {
		ws, release, err := workspaces(t).Acquire(ctx, "u1", "c-"+randID())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(release)
		sb, err := pooled.Claim(ctx, sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws})
		if sb != nil {
			_ = sb.Remove(ctx)
		}
		if rerr := pooled.Remove(ctx); rerr != nil {
			t.Errorf("remove after the failed claim: %v", rerr)
		}
		mounts, _ := os.ReadFile("/proc/self/mountinfo")
		if strings.Contains(string(mounts), pooled.ID()) {
			t.Errorf("slot still mounted after Remove")
		}
		return err
	}
	t.Run("claimed elsewhere", func(t *testing.T) {
		pooled := take(t)
		patch := []byte(`{"metadata":{"labels":{"` + kubernetes.LabelPool + `":"` + kubernetes.PoolClaimed + `"}}}`)
		if _, err := core.Pods(rt.Namespace()).Patch(ctx, pooled.ID(), "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := claim(t, pooled); err == nil || !strings.Contains(err.Error(), "labelled") && !strings.Contains(err.Error(), "not running as it was made") {
			t.Errorf("claim of a pod taken elsewhere: %v", err)
		}
	})
	t.Run("deleted", func(t *testing.T) {
		pooled := take(t)
		zero := int64(0)
		if err := core.Pods(rt.Namespace()).Delete(ctx, pooled.ID(), metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		if err := claim(t, pooled); err == nil {
			t.Error("claim of a deleted pod succeeded")
		}
	})
	t.Run("unclaimed", func(t *testing.T) {
		pooled := take(t)
		if err := pooled.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(rt.PoolDir(), pooled.ID())); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("slot folder after Remove: %v", err)
		}
	})
	if left := k8stest.Pods(t, rt); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
}

// TestPoolRefuses: what a pooled pod cannot be given is ErrNotPoolable,
// said before any pod is made: gVisor, claim storage, and a pool folder
// whose mounts do not reach the node.
func TestPoolRefuses(t *testing.T) {
	testenv.Root(t, "to attach a workspace to a running pod")
	ctx := context.Background()
	cases := []struct {
		name string
		opts kubernetes.Options
		spec sandbox.Spec
		want string
	}{
		{"gvisor", kubernetes.Options{Instance: "pool-refuses", PoolDir: filepath.Join(k8stest.SharedTempDir(t), "pool")},
			sandbox.Spec{Isolation: sandbox.IsolationGVisor}, "gvisor's kernel"},
		{"claim storage", kubernetes.Options{Instance: "pool-refuses", Storage: kubernetes.Storage{Claim: "data", ClaimRoot: t.TempDir()}},
			sandbox.Spec{}, "workspace_claim"},
		{"pool dir not shared", kubernetes.Options{Instance: "pool-refuses", PoolDir: t.TempDir()},
			sandbox.Spec{}, "shared propagation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := k8stest.Runtime(t, tc.opts)
			p, err := rt.Prestart(ctx, tc.spec)
			if p != nil {
				_ = p.Remove(ctx)
			}
			if !errors.Is(err, sandbox.ErrNotPoolable) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Prestart: %v, want ErrNotPoolable saying %q", err, tc.want)
			}
			if left := k8stest.Pods(t, rt); len(left) != 0 {
				t.Errorf("pods left: %v", left)
			}
		})
	}
}

// TestPoolSlotsReaped: the reaper's pass removes the pool slot a dead
// process left on this host, unmounting the workspace it still held, and
// leaves the slots of live processes alone.
func TestPoolSlotsReaped(t *testing.T) {
	rt := poolRuntime(t, "pool-reap")
	ctx := context.Background()
	live, err := rt.Prestart(ctx, sandbox.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = live.Remove(context.Background()) })
	host, _ := os.Hostname()
	dead := filepath.Join(rt.PoolDir(), "agentbox-dead")
	for _, d := range []string{filepath.Join(dead, "ws"), filepath.Join(dead, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A pid that runs, started at another time: a process that is gone.
	if err := os.WriteFile(filepath.Join(dead, "owner"), []byte(host+"/"+strconv.Itoa(os.Getpid())+"/1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", filepath.Join(dead, "ws"), "tmpfs", 0, "size=4k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(filepath.Join(dead, "ws"), syscall.MNT_DETACH) })
	if _, err := rt.Reap(ctx, kubernetes.ReapOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead process's slot after the reaper's pass: %v", err)
	}
	if _, err := os.Stat(filepath.Join(rt.PoolDir(), live.ID())); err != nil {
		t.Errorf("the live pooled pod's slot: %v", err)
	}
	if left := k8stest.Pods(t, rt); len(left) != 1 || left[0] != live.ID() {
		t.Errorf("pods after the reaper's pass: %v, want the live pooled one", left)
	}
}
