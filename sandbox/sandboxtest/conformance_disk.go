package sandboxtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// testSpecialFiles: what a command in the sandbox makes of the workspace
// (a FIFO, a FIFO where a folder is expected) is refused by the host side
// of the workspace at once, with ErrSpecialFile naming it (or not found
// there at all, Features.InnerSpecialFiles), and a write replaces it; the
// sandbox sees the regular file.
func (c *suite) testSpecialFiles(t *testing.T) {
	sb := c.sandbox(t, nil)
	ws := sb.Workspace()
	res := sh(t, sb, "mkfifo /workspace/notes.txt && mkdir -p /workspace/d && mkfifo /workspace/d/sub && echo made")
	if res.ExitCode != 0 || res.Stdout != "made\n" {
		t.Fatalf("mkfifo in the sandbox: %+v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), prompt)
	defer cancel()
	start := time.Now()
	for _, p := range []string{"notes.txt", "/workspace/notes.txt", "d/sub"} {
		_, rerr := ws.ReadFile(ctx, p, 0)
		_, lerr := ws.ListDir(ctx, p)
		if c.f.InnerSpecialFiles != "" {
			// The host sees nothing there: nothing to block on either.
			if !errors.Is(rerr, sandbox.ErrNotFound) || !errors.Is(lerr, sandbox.ErrNotFound) {
				t.Errorf("ReadFile(%q), ListDir = %v, %v; want ErrNotFound (%s)", p, rerr, lerr, c.f.InnerSpecialFiles)
			}
			continue
		}
		if !errors.Is(rerr, sandbox.ErrSpecialFile) || !strings.Contains(rerr.Error(), "named pipe") {
			t.Errorf("ReadFile(%q) = %v, want ErrSpecialFile naming a named pipe", p, rerr)
		}
		if !errors.Is(lerr, sandbox.ErrSpecialFile) {
			t.Errorf("ListDir(%q) = %v, want ErrSpecialFile", p, lerr)
		}
	}
	if d := time.Since(start); d > prompt {
		t.Errorf("refusing took %s", d)
	}
	if err := ws.WriteFile(ctx, "notes.txt", []byte("from host\n"), 0o644); err != nil {
		t.Fatalf("WriteFile over the FIFO: %v", err)
	}
	res = sh(t, sb, "test -f /workspace/notes.txt && cat /workspace/notes.txt")
	if res.ExitCode != 0 || res.Stdout != "from host\n" {
		t.Errorf("the sandbox sees %+v, want the regular file", res)
	}
}

// testDiskLimit: a workspace acquired with a disk limit (on a host that
// can enforce one, sandbox.DiskLoop) stops a command that writes past it
// with ENOSPC, keeps the host file within the limit, and takes writes
// again once the command's file is deleted.
func (c *suite) testDiskLimit(t *testing.T) {
	ctx := context.Background()
	d := filepath.Join(filepath.Dir(c.wss.Root()), "disk")
	if mode, why := sandbox.DetectDiskMode(ctx, d); mode != sandbox.DiskLoop {
		t.Skipf("this host cannot enforce disk limits (%s); the degraded mode is the sandbox package's to test", why)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = c.f.UID, c.f.GID
	}
	wss, err := sandbox.NewWorkspacesWith(d, sandbox.WorkspacesOptions{UID: uid, GID: gid, Disk: sandbox.DiskLoop})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 48 << 20
	ws, release, err := wss.AcquireWith(ctx, "u1", "disk", sandbox.AcquireOptions{MaxDisk: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	sb, err := c.rt.Create(ctx, c.spec(ws, "disk"))
	if sb != nil {
		// Removed before release (cleanups run last first).
		t.Cleanup(func() { _ = sb.Remove(context.Background()) })
	}
	if err != nil {
		t.Fatal(err)
	}
	res := sh(t, sb, "dd if=/dev/zero of=/workspace/big bs=1M count=100 2>&1; echo exit=$?")
	if !strings.Contains(res.Stdout, "No space left on device") || strings.Contains(res.Stdout, "exit=0") {
		t.Errorf("dd past the limit: %q", res.Stdout)
	}
	st, err := os.Stat(filepath.Join(filepath.Dir(ws.Dir()), ".disk.disk"))
	if err != nil || st.Size() > limit {
		t.Errorf("the image on the host: %v, %v; want at most %d bytes", st, err, limit)
	}
	res = sh(t, sb, "rm /workspace/big && echo ok > /workspace/after && cat /workspace/after")
	if res.ExitCode != 0 || res.Stdout != "ok\n" {
		t.Errorf("writing after deleting: %+v", res)
	}
}
