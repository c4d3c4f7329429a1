package local_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/local"
)

// dataRoot is a folder the sandbox user can reach (t.TempDir is 0700).
func dataRoot(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for p := d; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	return d
}

func newSandbox(t testing.TB, adjust func(*sandbox.Spec)) (sandbox.Sandbox, *sandbox.Workspace) {
	t.Helper()
	rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(t)})
	if err != nil {
		t.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(dataRoot(t), 1000, 1000)
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
	return sb, ws
}

func TestConfinement(t *testing.T) {
	t.Parallel()
	extra := filepath.Join(dataRoot(t), "tool")
	if err := os.WriteFile(extra, []byte("#!/bin/sh\necho tool-ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, ws := newSandbox(t, func(s *sandbox.Spec) {
		s.Mounts = []sandbox.Mount{{Source: extra, Target: "/usr/local/bin/tool"}}
	})
	script := `id -u; id -g; hostname; echo home=$HOME
touch /etc/x 2>/dev/null && echo etc-writable
touch /usr/x 2>/dev/null && echo usr-writable
echo 1 > /usr/local/bin/tool 2>/dev/null && echo mount-writable
touch /tmp/x $HOME/x /workspace/made && echo tmp-ok
ls /root 2>/dev/null && echo root-visible
ls / | tr '\n' ' '; echo
tool
grep -c : /proc/net/dev
echo pid=$$`
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{script}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	out := res.Stdout
	for _, w := range []string{"agentbox\n", "home=/home/agent", "tmp-ok", "tool-ran", "\n1\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("missing %q in:\n%s\nstderr: %s", w, out, res.Stderr)
		}
	}
	for _, bad := range []string{"etc-writable", "usr-writable", "mount-writable", "root-visible"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s:\n%s", bad, out)
		}
	}
	if os.Geteuid() == 0 {
		if !strings.HasPrefix(out, "1000\n1000\n") {
			t.Errorf("not running as 1000:1000:\n%s", out)
		}
		st, err := os.Stat(filepath.Join(ws.Dir(), "made"))
		if err != nil {
			t.Fatal(err)
		}
		if uid := st.Sys().(*syscall.Stat_t).Uid; uid != 1000 {
			t.Errorf("workspace file owned by %d, want 1000", uid)
		}
	}
	if !strings.Contains(out, "pid=2") && !strings.Contains(out, "pid=1") {
		t.Errorf("not in its own pid namespace:\n%s", out)
	}
}

func TestNetworkHost(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, func(s *sandbox.Spec) { s.Network = sandbox.NetworkHost })
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"grep", "-c", ":", "/proc/net/dev"}})
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile("/proc/net/dev")
	if want := fmt.Sprint(strings.Count(string(host), ":")) + "\n"; res.Stdout != want {
		t.Errorf("interfaces = %q, want the host's %q", res.Stdout, want)
	}
}

// sleepers lists host processes running `sleep <marker>`.
func sleepers(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) && strings.HasPrefix(string(b), "sleep\x00") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestRemoveKillsRunning(t *testing.T) {
	t.Parallel()
	sb, _ := newSandbox(t, nil)
	marker := fmt.Sprintf("%d.%d", 200+os.Getpid()%100, time.Now().UnixNano()%1000)
	p, err := sb.Start(context.Background(), sandbox.ExecRequest{Argv: []string{"sleep " + marker + " & sleep " + marker}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && len(sleepers(marker)) < 2; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if err := sb.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if left := sleepers(marker); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
	if err := sb.Remove(context.Background()); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("exec after remove: %v", err)
	}
}

func TestMissingBwrap(t *testing.T) {
	t.Parallel()
	_, err := local.New(local.Options{Bwrap: "/nonexistent/bwrap"})
	if !errors.Is(err, sandbox.ErrEngineUnavailable) || !strings.Contains(err.Error(), "install") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkCreateToFirstExec measures Create to first exec started
// (target: median under 25 ms).
func BenchmarkCreateToFirstExec(b *testing.B) {
	rt, err := local.New(local.Options{Bwrap: testenv.Bwrap(b)})
	if err != nil {
		b.Fatal(err)
	}
	wss, err := sandbox.NewWorkspaces(dataRoot(b), 1000, 1000)
	if err != nil {
		b.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "bench", "c")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	ctx := context.Background()
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		sb, err := rt.Create(ctx, sandbox.Spec{UserID: "bench", ChatID: "c", Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		ds = append(ds, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_, _ = p.Wait(ctx)
		_ = sb.Remove(ctx)
		b.StartTimer()
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median")
}

// TestHostCLIMount puts the host's Claude Code CLI at /usr/local/bin/claude,
// inside the read-only /usr, as the pipeline does.
func TestHostCLIMount(t *testing.T) {
	t.Parallel()
	bin := testenv.ClaudeBin(t)
	sb, _ := newSandbox(t, func(s *sandbox.Spec) {
		s.Mounts = []sandbox.Mount{{Source: bin, Target: "/usr/local/bin/claude"}}
	})
	res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"claude", "--version"}, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "Claude Code") {
		t.Errorf("claude --version: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}
