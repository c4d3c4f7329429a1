package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
)

func randID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newRuntime connects to the engine with an instance name of its own, so
// reaping in one test never touches another's containers.
func newRuntime(t testing.TB) (*docker.Runtime, string) {
	t.Helper()
	img := testenv.Image(t)
	rt, err := docker.New(context.Background(), docker.Options{Instance: "test-" + randID(), Image: img})
	if rt != nil {
		t.Cleanup(func() { _ = rt.Close(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return rt, img
}

// newSandbox creates a sandbox with a fresh workspace; spec may adjust the
// spec before creation.
func newSandbox(t testing.TB, rt *docker.Runtime, adjust func(*sandbox.Spec)) (*docker.Sandbox, *sandbox.Workspace) {
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
	spec := sandbox.Spec{UserID: "u1", ChatID: "c1", Workspace: ws}
	if adjust != nil {
		adjust(&spec)
	}
	sb, err := rt.Create(context.Background(), spec)
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	return sb.(*docker.Sandbox), ws
}

// isolations are the isolation levels the Docker runtime offers; tests of
// its hardening run under each (gVisor when the engine has it).
var isolations = []string{sandbox.IsolationRunc, sandbox.IsolationGVisor}

// eachIsolation runs test as a parallel subtest per isolation.
func eachIsolation(t *testing.T, test func(t *testing.T, isolation string)) {
	for _, iso := range isolations {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			if iso == sandbox.IsolationGVisor {
				testenv.GVisor(t)
			}
			test(t, iso)
		})
	}
}

func TestHardeningAsInspected(t *testing.T) {
	t.Parallel()
	eachIsolation(t, testHardeningAsInspected)
}

func testHardeningAsInspected(t *testing.T, isolation string) {
	rt, _ := newRuntime(t)
	extra := t.TempDir()
	sb, ws := newSandbox(t, rt, func(s *sandbox.Spec) {
		s.MemoryBytes = 256 << 20
		s.CPUs = 1.5
		s.PidsLimit = 100
		s.Mounts = []sandbox.Mount{{Source: extra, Target: "/opt/extra"}}
		s.Labels = map[string]string{"dev.agentbox.assistant": "a1", sandbox.LabelInstance: "forged"}
		s.Isolation = isolation
	})
	wantRuntime, wantPids := "", int64(100)
	if isolation == sandbox.IsolationGVisor {
		wantRuntime, wantPids = docker.DefaultGVisorRuntime, docker.GVisorHostPids(100)
	}
	ctx := context.Background()
	ins, err := rt.Client().ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	hc, cfg := ins.HostConfig, ins.Config
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"running", ins.State.Running, ins.State.Status},
		{"init", hc.Init != nil && *hc.Init, hc.Init},
		{"non-root user", cfg.User == "1000:1000", cfg.User},
		{"cap drop all", slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0, hc.CapDrop},
		{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges"), hc.SecurityOpt},
		{"not privileged", !hc.Privileged, hc.Privileged},
		{"pids limit", hc.PidsLimit != nil && *hc.PidsLimit == wantPids, hc.PidsLimit},
		{"engine runtime", hc.Runtime == wantRuntime || wantRuntime == "" && hc.Runtime == "runc", hc.Runtime},
		{"label isolation", cfg.Labels[sandbox.LabelIsolation] == isolation, cfg.Labels},
		{"memory", hc.Memory == 256<<20, hc.Memory},
		{"swap equals memory", hc.MemorySwap == hc.Memory, hc.MemorySwap},
		{"nano cpus", hc.NanoCPUs == 1_500_000_000, hc.NanoCPUs},
		{"read-only root", hc.ReadonlyRootfs, hc.ReadonlyRootfs},
		{"tmpfs /tmp", strings.Contains(hc.Tmpfs["/tmp"], "nosuid"), hc.Tmpfs},
		{"tmpfs home owned by agent", strings.Contains(hc.Tmpfs["/home/agent"], "uid=1000"), hc.Tmpfs},
		{"network none", hc.NetworkMode == "none", hc.NetworkMode},
		{"label product", cfg.Labels[sandbox.LabelProduct] == "agentbox", cfg.Labels},
		{"label instance (not forgeable)", cfg.Labels[sandbox.LabelInstance] == rt.Instance(), cfg.Labels},
		{"label user", cfg.Labels[sandbox.LabelUser] == "u1", cfg.Labels},
		{"label chat", cfg.Labels[sandbox.LabelChat] == "c1", cfg.Labels},
		{"label created", cfg.Labels[sandbox.LabelCreated] != "", cfg.Labels},
		{"label extra", cfg.Labels["dev.agentbox.assistant"] == "a1", cfg.Labels},
		{"HOME", slices.Contains(cfg.Env, "HOME=/home/agent"), cfg.Env},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}
	// Only the workspace (read-write) and the spec's mount (read-only).
	var mounts []string
	for _, m := range ins.Mounts {
		mounts = append(mounts, m.Source+":"+m.Destination+":"+map[bool]string{true: "rw", false: "ro"}[m.RW])
	}
	want := []string{ws.Dir() + ":/workspace:rw", extra + ":/opt/extra:ro"}
	if isolation == sandbox.IsolationGVisor {
		// The CLI's readable copy (see TestGVisorRunsExecuteOnly).
		for _, m := range ins.Mounts {
			if m.Destination == "/usr/local/bin/claude" {
				want = append(want, m.Source+":/usr/local/bin/claude:ro")
			}
		}
	}
	slices.Sort(mounts)
	slices.Sort(want)
	if !slices.Equal(mounts, want) {
		t.Errorf("mounts = %v, want %v", mounts, want)
	}

	// And as seen from inside.
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{`id -u; id -g; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status;
touch /etc/x 2>/dev/null && echo rootfs-writable; touch /tmp/x /home/agent/x /workspace/x && echo tmp-ok; ps -o comm= -p 1`}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"1000\n1000\n", "CapEff:\t0000000000000000", "NoNewPrivs:\t1", "tmp-ok", "docker-init"} {
		if !strings.Contains(res.Stdout, w) {
			t.Errorf("inside: missing %q in %q (stderr %q)", w, res.Stdout, res.Stderr)
		}
	}
	if strings.Contains(res.Stdout, "rootfs-writable") {
		t.Error("the root filesystem is writable")
	}
	st, err := os.Stat(filepath.Join(ws.Dir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fileUID(st); uid != 1000 {
		t.Errorf("file created in the sandbox is owned by uid %d, want 1000", uid)
	}
}

// TestNetworkHost: network host is the host's, under gVisor too (its
// host-network runtime), where a server on the host's loopback answers.
func TestNetworkHost(t *testing.T) {
	t.Parallel()
	eachIsolation(t, func(t *testing.T, isolation string) {
		rt, _ := newRuntime(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("from the host\n"))
				c.Close()
			}
		}()
		sb, _ := newSandbox(t, rt, func(s *sandbox.Spec) { s.Network = sandbox.NetworkHost; s.Isolation = isolation })
		ins, err := rt.Client().ContainerInspect(context.Background(), sb.ID())
		if err != nil {
			t.Fatal(err)
		}
		if ins.HostConfig.NetworkMode != "host" {
			t.Errorf("network = %q, want host", ins.HostConfig.NetworkMode)
		}
		if want := docker.DefaultGVisorRuntime + docker.HostNetSuffix; isolation == sandbox.IsolationGVisor && ins.HostConfig.Runtime != want {
			t.Errorf("engine runtime = %q, want %q", ins.HostConfig.Runtime, want)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"curl", "-sS", "--max-time", "30", fmt.Sprintf("telnet://127.0.0.1:%d", port)}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Stdout != "from the host\n" {
			t.Errorf("the host's loopback from the sandbox: %+v", res)
		}
	})
}

// TestGVisorRunsExecuteOnly: the image's Claude Code CLI is execute-only
// (0711); runc runs it as it is, gVisor, which cannot run a program its
// user cannot read, from a readable copy mounted over it, made once per
// image.
func TestGVisorRunsExecuteOnly(t *testing.T) {
	t.Parallel()
	eachIsolation(t, func(t *testing.T, isolation string) {
		rt, _ := newRuntime(t)
		var ids []string
		for range 2 {
			sb, _ := newSandbox(t, rt, func(s *sandbox.Spec) { s.Isolation = isolation })
			res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"sh", "-c", "stat -c %a /usr/local/bin/claude; claude --version"}})
			if err != nil {
				t.Fatal(err)
			}
			mode, version, _ := strings.Cut(res.Stdout, "\n")
			want := map[string]string{sandbox.IsolationRunc: "711", sandbox.IsolationGVisor: "755"}[isolation]
			if res.ExitCode != 0 || mode != want || !strings.Contains(version, "Claude Code") {
				t.Errorf("claude in the sandbox: %+v; want mode %s and its version", res, want)
			}
			ins, err := rt.Client().ContainerInspect(context.Background(), sb.ID())
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ins.Mounts {
				if m.Destination == "/usr/local/bin/claude" {
					ids = append(ids, m.Source)
				}
			}
		}
		switch {
		case isolation == sandbox.IsolationRunc && len(ids) != 0:
			t.Errorf("runc mounts a copy: %v", ids)
		case isolation == sandbox.IsolationGVisor && (len(ids) != 2 || ids[0] != ids[1]):
			t.Errorf("gVisor's copies: %v, want one, shared", ids)
		}
	})
}

// TestLimitsEnforced: the memory and process limits hold from inside. A
// program that allocates past the memory limit is killed and, under runc,
// the sandbox lives on; under gVisor it mostly does, but the host's OOM
// killer may take the Sentry too (GVisor memory in docs/isolation.md), and
// then the next command fails as removed, naming the memory limit, never
// with the runtime's complaint passed off as the command's output; a fork bomb never takes more of the host than the limit
// allows: under runc its forks fail, under gVisor the sandbox stops whole
// once the Sentry cannot start a thread (see GVisorHostPids); either way a
// new sandbox works after it.
func TestLimitsEnforced(t *testing.T) {
	t.Parallel()
	eachIsolation(t, func(t *testing.T, isolation string) {
		rt, _ := newRuntime(t)
		ctx := context.Background()
		limits := func(s *sandbox.Spec) { s.MemoryBytes = 256 << 20; s.PidsLimit = 64; s.Isolation = isolation }
		sb, _ := newSandbox(t, rt, limits)
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"node", "-e", "const a = []; for (let i = 0; i < 100; i++) a.push(Buffer.alloc(10 << 20, 1)); console.log('allocated')"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || strings.Contains(res.Stdout, "allocated") {
			t.Errorf("1 GB allocated within a 256 MiB limit: %+v", res)
		}
		res, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "alive"}})
		switch {
		case err == nil && res.Stdout == "alive\n":
		case isolation == sandbox.IsolationGVisor && errors.Is(err, sandbox.ErrRemoved) && strings.Contains(err.Error(), "memory limit"):
			t.Logf("the host's OOM killer took the gVisor sandbox whole: %v", err)
			sb, _ = newSandbox(t, rt, limits)
		default:
			t.Fatalf("after the allocation: %+v, %v; want the sandbox alive", res, err)
		}
		cgroup := "/sys/fs/cgroup/pids/docker/" + sb.ID() + "/pids.max"
		if b, err := os.ReadFile(cgroup); err == nil {
			want := int64(64)
			if isolation == sandbox.IsolationGVisor {
				want = docker.GVisorHostPids(64)
			}
			if got := strings.TrimSpace(string(b)); got != fmt.Sprint(want) {
				t.Errorf("host pids.max = %s, want %d", got, want)
			}
		}
		// dash gives up at its first failed fork; the sleeps end soon.
		_, err = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{`i=0; while [ $i -lt 300 ]; do sleep 3 & i=$((i+1)); done`}, Shell: true, Timeout: time.Minute})
		if isolation == sandbox.IsolationRunc {
			if err != nil {
				t.Fatalf("fork bomb under runc: %v", err)
			}
			alive := false
			for deadline := time.Now().Add(30 * time.Second); !alive && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "alive"}})
				alive = err == nil && res.Stdout == "alive\n"
			}
			if !alive {
				t.Error("the sandbox did not run commands again once the fork bomb's processes ended")
			}
		}
		again, _ := newSandbox(t, rt, func(s *sandbox.Spec) { s.Isolation = isolation })
		if res, err := again.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "ok"}}); err != nil || res.Stdout != "ok\n" {
			t.Errorf("a new sandbox after the fork bomb: %+v, %v", res, err)
		}
	})
}

// TestGVisorSentryGoneIsRemoved: a gVisor sandbox whose Sentry the host
// killed (as its OOM killer may at the memory limit) fails the next
// command as removed, naming the memory limit, whether the engine has
// noticed the container stop yet or only its runtime fails the exec.
func TestGVisorSentryGoneIsRemoved(t *testing.T) {
	t.Parallel()
	testenv.GVisor(t)
	rt, _ := newRuntime(t)
	ctx := context.Background()
	sb, _ := newSandbox(t, rt, func(s *sandbox.Spec) { s.MemoryBytes = 256 << 20; s.Isolation = sandbox.IsolationGVisor })
	ins, err := rt.Client().ContainerInspect(ctx, sb.ID())
	if err != nil {
		t.Fatal(err)
	}
	sentry, err := os.FindProcess(ins.State.Pid) // runsc's sandbox process
	if err != nil {
		t.Fatal(err)
	}
	if err := sentry.Kill(); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"echo", "alive"}})
	if !errors.Is(err, sandbox.ErrRemoved) || !strings.Contains(err.Error(), "memory limit of 256 MiB") {
		t.Errorf("exec once the Sentry is gone: %+v, %v; want ErrRemoved naming the memory limit", res, err)
	}
}

// TestCreateRejectsBadSpecs: what only Docker refuses (the conformance
// suite checks the specs every runtime refuses).
func TestCreateRejectsBadSpecs(t *testing.T) {
	t.Parallel()
	rt, _ := newRuntime(t)
	wss, err := sandbox.NewWorkspaces(t.TempDir(), -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "u", "c")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	cases := []struct {
		name string
		spec sandbox.Spec
		want string
	}{
		{"missing image", sandbox.Spec{UserID: "u", ChatID: "c", Workspace: ws, Image: "agentbox-test/none:missing"}, "never pulls"},
		{"tiny memory", sandbox.Spec{UserID: "u", ChatID: "c", Workspace: ws, MemoryBytes: 1000}, "memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sb, err := rt.Create(context.Background(), c.spec)
			if sb != nil {
				_ = sb.Remove(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestReaperRemovesOrphan(t *testing.T) {
	t.Parallel()
	rt, img := newRuntime(t)
	live, _ := newSandbox(t, rt, nil)
	cli := rt.Client()
	ctx := context.Background()
	mk := func(instance string, age time.Duration, run string) string {
		name := "agentbox-test-orphan-" + randID()
		_, err := cli.ContainerCreate(ctx, &container.Config{
			Image:      img,
			Entrypoint: []string{"sleep", "infinity"},
			Labels: map[string]string{
				sandbox.LabelProduct:  "agentbox",
				sandbox.LabelInstance: instance,
				sandbox.LabelCreated:  time.Now().Add(-age).UTC().Format(time.RFC3339),
				docker.LabelRun:       run,
			},
		}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
		t.Cleanup(func() { _ = cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}) })
		if err != nil {
			t.Fatal(err)
		}
		return name
	}
	dead := mk("dead-"+randID(), 3*time.Hour, "")
	young := mk("other-"+randID(), time.Minute, "")
	previousRun := mk(rt.Instance(), time.Minute, deadRun(t))
	// A one-shot `agentbox run` killed before its cleanup: another
	// instance, young, but its process is gone.
	crashedRun := mk("agentbox-run-"+randID(), time.Minute, deadRun(t))

	got, err := rt.Reap(ctx, docker.ReapOptions{DryRun: true, Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dead, previousRun, crashedRun}
	slices.Sort(want)
	if !containsAll(got, want) || slices.Contains(got, young) || slices.Contains(got, live.Name()) {
		t.Fatalf("dry run reaped %v, want %v (not %s, %s)", got, want, young, live.Name())
	}
	if _, err := cli.ContainerInspect(ctx, dead); err != nil {
		t.Fatalf("dry run removed: %v", err)
	}
	got, err = rt.Reap(ctx, docker.ReapOptions{Grace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !containsAll(got, want) {
		t.Fatalf("reaped %v, want %v", got, want)
	}
	for _, n := range want {
		if _, err := cli.ContainerInspect(ctx, n); !cerrdefs.IsNotFound(err) {
			t.Errorf("%s still there: %v", n, err)
		}
	}
	for _, n := range []string{young, live.ID()} {
		if _, err := cli.ContainerInspect(ctx, n); err != nil {
			t.Errorf("%s was removed: %v", n, err)
		}
	}
}

// containsAll: other tests' containers may also show up in a reap of other
// instances, so check inclusion.
func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

func TestEngineUnavailable(t *testing.T) {
	t.Parallel()
	_, err := docker.New(context.Background(), docker.Options{Host: "unix:///nonexistent/docker.sock"})
	if !errors.Is(err, sandbox.ErrEngineUnavailable) {
		t.Fatalf("err = %v, want ErrEngineUnavailable", err)
	}
	if !strings.Contains(err.Error(), "running") {
		t.Errorf("no hint in %q", err)
	}
}

func fileUID(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// TestWedgedEngine: an engine that accepts connections but never answers
// yields ErrEngineUnavailable after the call timeout, not a hang.
func TestWedgedEngine(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "wedged.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		var held []net.Conn // never answered
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	start := time.Now()
	_, err = docker.New(context.Background(), docker.Options{Host: "unix://" + sock, CallTimeout: 300 * time.Millisecond})
	if !errors.Is(err, sandbox.ErrEngineUnavailable) {
		t.Fatalf("err = %v, want ErrEngineUnavailable", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestStartReaper(t *testing.T) {
	t.Parallel()
	rt, img := newRuntime(t)
	cli := rt.Client()
	ctx := context.Background()
	name := "agentbox-test-prevrun-" + randID()
	_, err := cli.ContainerCreate(ctx, &container.Config{
		Image:      img,
		Entrypoint: []string{"sleep", "infinity"},
		Labels: map[string]string{
			sandbox.LabelProduct:  "agentbox",
			sandbox.LabelInstance: rt.Instance(),
			docker.LabelRun:       deadRun(t),
		},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	t.Cleanup(func() { _ = cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}) })
	if err != nil {
		t.Fatal(err)
	}
	rt.StartReaper(time.Hour) // reaps right away
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := cli.ContainerInspect(ctx, name); cerrdefs.IsNotFound(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the reaper did not remove the container of an earlier run")
}

// deadRun is the run id of a process of this host that no longer exists.
func deadRun(t testing.TB) string {
	t.Helper()
	host, _ := os.Hostname()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s/%d/123/abcd", host, cmd.Process.Pid)
}

// TestReaperSparesLiveRunOfSameInstance: two live processes may share an
// instance name (a server and a one-shot `agentbox run` on one host);
// neither may take the other's sandboxes for leftovers.
func TestReaperSparesLiveRunOfSameInstance(t *testing.T) {
	t.Parallel()
	rt, img := newRuntime(t)
	cli := rt.Client()
	ctx := context.Background()
	// This test process is alive: a run id naming it with another random
	// part stands for a second runtime in a live process.
	other, err := docker.New(ctx, docker.Options{Instance: rt.Instance()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	name := "agentbox-test-liverun-" + randID()
	_, err = cli.ContainerCreate(ctx, &container.Config{
		Image:      img,
		Entrypoint: []string{"sleep", "infinity"},
		Labels: map[string]string{
			sandbox.LabelProduct:  "agentbox",
			sandbox.LabelInstance: rt.Instance(),
			docker.LabelRun:       docker.RunID(other),
		},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	t.Cleanup(func() { _ = cli.ContainerRemove(ctx, name, container.RemoveOptions{Force: true}) })
	if err != nil {
		t.Fatal(err)
	}
	reaped, err := rt.Reap(ctx, docker.ReapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reaped {
		if r == name {
			t.Fatal("the reaper removed a live process's sandbox of the same instance")
		}
	}
	if _, err := cli.ContainerInspect(ctx, name); err != nil {
		t.Fatalf("container gone: %v", err)
	}
}
