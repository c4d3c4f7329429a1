package sandboxtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// testBadSpecs: Create rejects a spec it cannot honour, saying why.
func (c *suite) testBadSpecs(t *testing.T) {
	ws, _ := c.workspace(t)
	cases := []struct {
		name   string
		adjust func(*sandbox.Spec)
		want   string
	}{
		{"no workspace", func(s *sandbox.Spec) { s.Workspace = nil }, "no workspace"},
		{"bad user", func(s *sandbox.Spec) { s.UserID = "../x" }, "user id"},
		{"bad chat", func(s *sandbox.Spec) { s.ChatID = "a/b" }, "chat id"},
		{"bad network", func(s *sandbox.Spec) { s.Network = "bridge" }, "network"},
		{"bad isolation", func(s *sandbox.Spec) { s.Isolation = "vm" }, "isolation"},
		{"relative mount", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "x", Target: "/x"}} }, "absolute"},
		{"mount over workspace", func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "/usr", Target: "/workspace/x"}} }, "workspace"},
		{"bad env", func(s *sandbox.Spec) { s.Env = map[string]string{"A=B": "x"} }, "environment variable"},
		{"hide a path", func(s *sandbox.Spec) { s.Hide = []string{"a/b"} }, "name at the workspace's root"},
		{"hide the parent", func(s *sandbox.Spec) { s.Hide = []string{"../"} }, "name at the workspace's root"},
		{"hide twice", func(s *sandbox.Spec) { s.Hide = []string{".x/", ".x"} }, "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := c.spec(ws, "c")
			tc.adjust(&spec)
			sb, err := c.rt.Create(context.Background(), spec)
			if sb != nil {
				_ = sb.Remove(context.Background())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// testCreateRemove: a sandbox has an id and the spec's workspace; Remove
// deletes it (idempotently) and keeps the workspace; a removed sandbox
// runs nothing.
func (c *suite) testCreateRemove(t *testing.T) {
	ws, chat := c.workspace(t)
	ctx := context.Background()
	sb, err := c.rt.Create(ctx, c.spec(ws, chat))
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID() == "" || sb.Workspace() != ws {
		t.Errorf("id %q, workspace %p; want an id and the spec's workspace %p", sb.ID(), sb.Workspace(), ws)
	}
	sh(t, sb, "echo kept > /workspace/kept.txt")
	c.checkExists(t, sb, true)
	if err := sb.Remove(ctx); err != nil {
		t.Fatalf("remove: %v", err)
	}
	c.checkExists(t, sb, false)
	if err := sb.Remove(ctx); err != nil {
		t.Errorf("second remove: %v", err)
	}
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("exec after remove: err = %v, want ErrRemoved", err)
	}
	if _, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("start after remove: err = %v, want ErrRemoved", err)
	}
	if b, err := ws.ReadFile(context.Background(), "kept.txt", 0); err != nil || string(b) != "kept\n" {
		t.Errorf("workspace after remove: %q, %v; want it kept", b, err)
	}
}

// checkExists checks, on runtimes with an engine, whether the sandbox's
// object exists.
func (c *suite) checkExists(t *testing.T, sb sandbox.Sandbox, want bool) {
	t.Helper()
	if c.f.Engine == nil {
		return
	}
	got, err := c.f.Engine.Exists(context.Background(), sb)
	if err != nil || got != want {
		t.Errorf("sandbox %s exists = %v, %v; want %v", sb.ID(), got, err, want)
	}
}

// testCancelThenRemove: a request that ends (its context cancelled) still
// removes its sandbox, quickly, with that same context.
func (c *suite) testCancelThenRemove(t *testing.T) {
	sb := c.sandbox(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"sleep", "100"}})
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	if _, err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait err = %v, want context.Canceled", err)
	}
	start := time.Now()
	if err := sb.Remove(ctx); err != nil { // ctx is already cancelled
		t.Fatal(err)
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("removal took %s", d)
	}
	c.checkExists(t, sb, false)
	if err := sb.Remove(context.Background()); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	if _, err := sb.Exec(context.Background(), sandbox.ExecRequest{Argv: []string{"true"}}); !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("exec after remove: %v", err)
	}
}

// testRemoveNotFound: a sandbox deleted behind the runtime's back counts
// as removed.
func (c *suite) testRemoveNotFound(t *testing.T) {
	if c.f.Engine == nil {
		t.Log("no engine object to delete (Features.Engine is nil)")
		return
	}
	sb := c.sandbox(t, nil)
	if err := c.f.Engine.Destroy(context.Background(), sb); err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if err := sb.Remove(context.Background()); err != nil {
		t.Errorf("remove of a sandbox already gone: %v", err)
	}
}

// testRemoveKillsRunning: Remove stops the commands still running, with
// every process they started.
func (c *suite) testRemoveKillsRunning(t *testing.T) {
	sb := c.sandbox(t, nil)
	marker := sleepMarker()
	trace := "trace-" + randHex(4)
	p, err := sb.Start(context.Background(), sandbox.ExecRequest{
		Argv: []string{fmt.Sprintf("sleep %s & %s sleep %s", marker, traceWriter(trace), marker)}, Shell: true})
	if err != nil {
		t.Fatal(err)
	}
	c.awaitSleeps(sb, marker, 2)
	if err := sb.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil && !errors.Is(err, sandbox.ErrRemoved) {
		t.Errorf("wait after remove: %v, want nil or ErrRemoved", err)
	}
	c.checkNothingLeft(t, sb, marker, trace)
}

// testWorkspace: files written on the host are seen in the sandbox and the
// other way round, owned by the sandbox user.
func (c *suite) testWorkspace(t *testing.T) {
	sb := c.sandbox(t, nil)
	ws := sb.Workspace()
	if err := ws.WriteFile(context.Background(), "in/host.txt", []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if res := sh(t, sb, "cat in/host.txt && mkdir -p out && echo from sandbox > out/s.txt"); res.Stdout != "from host" || res.ExitCode != 0 {
		t.Errorf("in the sandbox: %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if b, err := ws.ReadFile(context.Background(), "out/s.txt", 0); err != nil || string(b) != "from sandbox\n" {
		t.Errorf("on the host: %q, %v", b, err)
	}
	st, err := os.Stat(filepath.Join(ws.Dir(), "out", "s.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && (int(s.Uid) != c.f.UID || int(s.Gid) != c.f.GID) {
		t.Errorf("a file made in the sandbox is owned by %d:%d, want %d:%d", s.Uid, s.Gid, c.f.UID, c.f.GID)
	}
}

// testHide: the spec's hidden names that the workspace has are empty and
// read-only inside the sandbox (they cannot be written, moved or removed),
// while the host's files there stay; a missing one is not made, a symlink
// in its place is removed, one of the other kind is left as it is.
func (c *suite) testHide(t *testing.T) {
	ws, chat := c.workspace(t)
	ctx := context.Background()
	for f, data := range map[string]string{".conf/settings.json": "host's", "conf.json": `{"host": true}`, ".file": "a file", "dir.json/x": "x"} {
		if err := ws.WriteFile(ctx, f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(ws.Dir(), ".link")); err != nil {
		t.Fatal(err)
	}
	spec := c.spec(ws, chat)
	spec.Hide = []string{".conf/", "conf.json", ".new/", "new.json", ".link/", ".file/", "dir.json"}
	sb, err := c.rt.Create(ctx, spec)
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	res := sh(t, sb, `cd /workspace
echo ".conf: $(ls -A .conf | wc -l) conf.json: $(wc -c < conf.json)"
touch .conf/x 2>/dev/null && echo "wrote .conf"
echo x > conf.json 2>/dev/null && echo "wrote conf.json"
for n in .conf conf.json; do
  mv $n $n.moved 2>/dev/null && echo "moved $n"
  rm -rf $n 2>/dev/null; [ -e $n ] || echo "removed $n"
done
ls -A | sort | tr '\n' ' '`)
	if want := ".conf: 0 conf.json: 0\n.conf .file conf.json dir.json "; res.Stdout != want {
		t.Errorf("inside: %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	for f, want := range map[string]string{".conf/settings.json": "host's", "conf.json": `{"host": true}`, ".file": "a file"} {
		if b, err := ws.ReadFile(ctx, f, 0); err != nil || string(b) != want {
			t.Errorf("the host's %s: %q, %v", f, b, err)
		}
	}
	for _, n := range []string{".new", "new.json", ".link"} {
		if _, err := os.Lstat(filepath.Join(ws.Dir(), n)); !os.IsNotExist(err) {
			t.Errorf("%s on the host: %v, want it absent", n, err)
		}
	}
}

// testUser: commands run as the sandbox user.
func (c *suite) testUser(t *testing.T) {
	sb := c.sandbox(t, nil)
	if res, want := sh(t, sb, "id -u; id -g"), fmt.Sprintf("%d\n%d\n", c.f.UID, c.f.GID); res.Stdout != want {
		t.Errorf("id = %q, want %q", res.Stdout, want)
	}
}

// testReadOnly: the system folders and read-only mounts cannot be
// written; /tmp, $HOME and the workspace can.
func (c *suite) testReadOnly(t *testing.T) {
	extra := c.hostDir(t)
	if err := os.WriteFile(filepath.Join(extra, "f"), []byte("mounted"), 0o644); err != nil {
		t.Fatal(err)
	}
	const target = "/opt/agentbox-extra"
	sb := c.sandbox(t, func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: extra, Target: target}} })
	res := sh(t, sb, `for d in / /etc /usr /bin `+target+`; do touch $d/agentbox-x 2>/dev/null && echo "writable:$d"; done
touch /tmp/x "$HOME/x" /workspace/x && echo tmp-ok
cat `+target+`/f`)
	want := "tmp-ok\nmounted"
	if c.f.WritableRoot {
		want = "writable:/\n" + want
	}
	if res.Stdout != want {
		t.Errorf("got %q, want %q (stderr %q)", res.Stdout, want, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(extra, "agentbox-x")); err == nil {
		t.Error("a read-only mount was written")
	}
}

// testNetworkNone: with network none a sandbox has only loopback.
func (c *suite) testNetworkNone(t *testing.T) {
	sb := c.sandbox(t, func(s *sandbox.Spec) { s.Network = sandbox.NetworkNone })
	if res := sh(t, sb, "grep -c : /proc/net/dev; grep -o 'lo:' /proc/net/dev"); res.Stdout != "1\nlo:\n" {
		t.Errorf("interfaces: %q (stderr %q), want loopback alone", res.Stdout, res.Stderr)
	}
}

// testConfinement: file operations on the workspace never leave it, and
// the sandbox sees nothing of the host beyond what is mounted.
func (c *suite) testConfinement(t *testing.T) {
	sb := c.sandbox(t, nil)
	ws := sb.Workspace()
	// Another chat's workspace stands for what a sandbox must not reach.
	other, _ := c.workspace(t)
	if err := other.WriteFile(context.Background(), "secret", []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other.Dir(), filepath.Join(ws.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../x", "/etc/passwd", "link/secret"} {
		if _, err := ws.ReadFile(context.Background(), p, 0); !errors.Is(err, sandbox.ErrPathOutside) {
			t.Errorf("ReadFile(%q): err = %v, want ErrPathOutside", p, err)
		}
	}
	if err := ws.WriteFile(context.Background(), "link/x", []byte("y"), 0o644); !errors.Is(err, sandbox.ErrPathOutside) {
		t.Errorf("WriteFile through a symlink out: err = %v, want ErrPathOutside", err)
	}
	if _, err := os.Stat(filepath.Join(other.Dir(), "x")); err == nil {
		t.Error("WriteFile escaped through the symlink")
	}
	res := sh(t, sb, fmt.Sprintf("cat %s/secret link/secret 2>/dev/null; echo end", other.Dir()))
	if res.Stdout != "end\n" {
		t.Errorf("the sandbox read another workspace: %q", res.Stdout)
	}
}

// testLabels: the runtime labels what it creates, from the spec and with
// its own labels, which a spec cannot forge.
func (c *suite) testLabels(t *testing.T) {
	if c.f.Engine == nil {
		t.Log("nothing to label (Features.Engine is nil)")
		return
	}
	before := time.Now().Add(-time.Minute)
	ws, chat := c.workspace(t)
	spec := c.spec(ws, chat)
	spec.Labels = map[string]string{"dev.agentbox.assistant": "a1", sandbox.LabelInstance: "forged", sandbox.LabelProduct: "forged", sandbox.LabelIsolation: "forged"}
	sb, err := c.rt.Create(context.Background(), spec)
	if sb != nil {
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.f.Engine.Labels(context.Background(), sb)
	if err != nil {
		t.Fatal(err)
	}
	created, err := time.Parse(time.RFC3339, l[sandbox.LabelCreated])
	checks := []struct {
		name string
		ok   bool
	}{
		{"product", l[sandbox.LabelProduct] == "agentbox"},
		{"instance (not forgeable)", l[sandbox.LabelInstance] != "" && l[sandbox.LabelInstance] != "forged"},
		{"user", l[sandbox.LabelUser] == "u1"},
		{"chat", l[sandbox.LabelChat] == chat},
		{"created (RFC 3339, now)", err == nil && created.After(before) && created.Before(time.Now().Add(time.Minute))},
		{"isolation (not forgeable)", l[sandbox.LabelIsolation] == cmp.Or(c.f.Isolation, sandbox.IsolationRunc)},
		{"the spec's own", l["dev.agentbox.assistant"] == "a1"},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("label %s: got %v", ch.name, l)
		}
	}
}
