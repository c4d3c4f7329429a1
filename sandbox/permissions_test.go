package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentbox/agentbox/internal/testenv"
)

// asUser runs argv as uid:gid (with the supplementary groups given) and
// returns its combined output and error.
func asUser(uid, gid int, groups []uint32, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func wantMode(t *testing.T, p string, mode os.FileMode, uid, gid int) {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Sys().(*syscall.Stat_t)
	if st.Mode().Perm() != mode || uid >= 0 && int(s.Uid) != uid || gid >= 0 && int(s.Gid) != gid {
		t.Errorf("%s: mode %v owned by %d:%d, want %v owned by %d:%d", p, st.Mode().Perm(), s.Uid, s.Gid, mode, uid, gid)
	}
}

// TestWorkspacesNotReadableByOthers: as a server running as root makes
// them, the data root and the folders above workspaces can be passed only
// by the sandbox user's group and listed by root alone; a workspace (a
// folder, or a mounted disk image) is the sandbox user's alone; markers
// and images are 0600. Another user of the host, even one in the sandbox
// user's group, lists and reads nothing; the sandbox user (the agent)
// reads its workspace. Workspaces an earlier version made readable by
// everyone are closed when opened and recovered, as a server does at
// start (a data root that existed is the operator's, and left as it is).
func TestWorkspacesNotReadableByOthers(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to act as other users of the host (CI runs as root)")
	}
	ctx := context.Background()
	base := t.TempDir()
	// The test's own folders must not be what stops the other users.
	for p := base; p != os.TempDir() && p != "/"; p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(base, "data")
	old := filepath.Join(data, "workspaces", "u0", "c0")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "secret.txt"), []byte("s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mode := DiskNone
	if m, _ := DetectDiskMode(ctx, data); m == DiskLoop {
		mode = DiskLoop
	} else if testenv.CI() {
		t.Fatalf("no loop-mounted disks under CI (DetectDiskMode: %s)", m)
	}
	w, err := NewWorkspacesWith(data, WorkspacesOptions{UID: 1000, GID: 1000, Disk: mode})
	if err != nil {
		t.Fatal(err)
	}
	wantMode(t, filepath.Join(data, "workspaces"), 0o710, 0, 1000)
	if _, err := w.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	wantMode(t, filepath.Join(data, "workspaces", "u0"), 0o710, 0, 1000)
	wantMode(t, old, 0o700, 0, 0)

	fresh := filepath.Join(base, "fresh")
	if _, err := NewWorkspacesWith(fresh, WorkspacesOptions{UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	wantMode(t, fresh, 0o710, 0, 1000)
	wantMode(t, filepath.Join(fresh, "workspaces"), 0o710, 0, 1000)

	ws, release, err := w.Acquire(ctx, "alice", "folder")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	dirs := []string{old, ws.Dir()}
	wantMode(t, filepath.Join(data, "workspaces", "alice"), 0o710, 0, 1000)
	wantMode(t, ws.Dir(), 0o700, 1000, 1000)
	wantMode(t, w.marker("alice", "folder"), 0o600, 0, -1)
	if mode == DiskLoop {
		img, releaseImg, err := w.AcquireWith(ctx, "alice", "image", AcquireOptions{MaxDisk: 40 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer releaseImg()
		if _, ok := mountPointOf(img.Dir()); !ok {
			t.Fatal("the limited workspace is not a mounted image")
		}
		wantMode(t, img.Dir(), 0o700, 1000, 1000)
		wantMode(t, imagePath(w.Root(), "alice", "image"), 0o600, 0, -1)
		dirs = append(dirs, img.Dir())
	}
	for _, dir := range dirs {
		secret := filepath.Join(dir, "secret.txt")
		if dir != old {
			if err := os.WriteFile(secret, []byte("s3cret\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(secret, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}
		for _, who := range []struct {
			name     string
			uid, gid int
			groups   []uint32
		}{{"another user", 1001, 1001, nil}, {"another user in the sandbox group", 1001, 1001, []uint32{1000}}} {
			for _, argv := range [][]string{{"cat", secret}, {"ls", dir}, {"ls", filepath.Join(data, "workspaces")}} {
				if out, err := asUser(who.uid, who.gid, who.groups, argv...); err == nil || !strings.Contains(out, "Permission denied") {
					t.Errorf("%s: %s: %q, %v; want Permission denied", who.name, strings.Join(argv, " "), out, err)
				}
			}
		}
		if dir == old {
			continue // an earlier version's, not the sandbox user's
		}
		if out, err := asUser(1000, 1000, nil, "cat", secret); err != nil || out != "s3cret\n" {
			t.Errorf("the sandbox user reads its workspace: %q, %v", out, err)
		}
	}
}

// mountPointOf reports whether dir is a mount point.
func mountPointOf(dir string) (string, bool) {
	dev, err := mountedDevice(dir)
	return dev, err == nil && dev != ""
}
