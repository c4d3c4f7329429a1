package sandbox

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

func TestWorkspacesRemove(t *testing.T) {
	t.Parallel()
	wss, err := NewWorkspaces(t.TempDir(), -1, -1)
	must(t, err)
	ctx := context.Background()
	ws, release, err := wss.Acquire(ctx, "u", "c")
	must(t, err)
	must(t, ws.WriteFile(ctx, "a/b.txt", []byte("x"), 0))
	if err := wss.Remove(ctx, "u", "c"); !errors.Is(err, ErrInUse) {
		t.Fatalf("remove while acquired = %v, want ErrInUse", err)
	}
	release()
	must(t, wss.Remove(ctx, "u", "c"))
	for _, p := range []string{filepath.Join(wss.Root(), "u", "c"), markerPath(wss.Root(), "u", "c")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(wss.Root(), "u")); len(left) != 0 {
		t.Errorf("left in the user's folder: %v", left)
	}
	must(t, wss.Remove(ctx, "u", "c")) // gone: not an error
	must(t, wss.Remove(ctx, "u", "never"))
	if err := wss.Remove(ctx, "u", "../x"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("bad id = %v", err)
	}
	// A workspace acquired again after removal is new and empty.
	ws, release, err = wss.Acquire(ctx, "u", "c")
	must(t, err)
	defer release()
	if ents, _ := ws.ListDir(ctx, "."); len(ents) != 0 {
		t.Errorf("recreated workspace holds %v", ents)
	}
}

func TestZip(t *testing.T) {
	t.Parallel()
	ws, _ := escapeFixture(t)
	d := ws.Dir()
	must(t, os.WriteFile(filepath.Join(d, "top.txt"), []byte("top"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(d, "fifo"), 0o644))

	var buf bytes.Buffer
	rep, err := ws.Zip(context.Background(), &buf, ".")
	must(t, err)
	got := zipEntries(t, buf.Bytes())
	want := map[string]string{"top.txt": "top", "sub/": "", "sub/deep/": "", "sub/file": "inside"}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", keys(got), keys(want))
	}
	for name, content := range want {
		if c, ok := got[name]; !ok || c != content {
			t.Errorf("entry %q = %q (%v), want %q", name, c, ok, content)
		}
	}
	for name, c := range got {
		if strings.Contains(c, secret) {
			t.Errorf("entry %q holds the secret outside the workspace", name)
		}
	}
	if rep.Files != 2 || rep.Skipped == 0 {
		t.Errorf("report %+v: want 2 files and the symlinks and FIFO skipped", rep)
	}

	buf.Reset()
	_, err = ws.Zip(context.Background(), &buf, "/workspace/sub")
	must(t, err)
	if got := zipEntries(t, buf.Bytes()); len(got) != 2 || got["file"] != "inside" {
		t.Errorf("sub = %v", got)
	}
	for _, p := range []string{"../x", "link_out", "top.txt", "missing"} {
		if _, err := ws.Zip(context.Background(), io.Discard, p); err == nil {
			t.Errorf("zip %q: no error", p)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ws.Zip(ctx, io.Discard, "."); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled zip = %v", err)
	}
}

func zipEntries(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	must(t, err)
	out := map[string]string{}
	for _, f := range zr.File {
		rc, err := f.Open()
		must(t, err)
		c, err := io.ReadAll(rc)
		must(t, err)
		rc.Close()
		out[f.Name] = string(c)
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestWorkspacesRemoveImage: a workspace that is a disk image, kept
// mounted after its release, is unmounted and removed with its image.
func TestWorkspacesRemoveImage(t *testing.T) {
	testenv.LoopDisks(t)
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop, KeepMounted: time.Hour})
	must(t, err)
	ctx := context.Background()
	ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	must(t, ws.WriteFile(ctx, "f.txt", []byte("x"), 0))
	release()
	must(t, w.Remove(ctx, "u", "c"))
	for _, p := range []string{filepath.Join(w.Root(), "u", "c"), imagePath(w.Root(), "u", "c")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	if l := waitLoopsGone(w.Root()); len(l) > 0 {
		t.Errorf("loop devices left attached: %v", l)
	}
	must(t, w.Close(ctx))
}
