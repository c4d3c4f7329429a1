package sandbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const secret = "TOP-SECRET-OUTSIDE"

// escapeFixture builds {tmp}/outside (a secret file and folder) next to a
// workspace {tmp}/ws whose agent planted symlinks pointing out.
func escapeFixture(t testing.TB) (*Workspace, string) {
	t.Helper()
	tmp := t.TempDir()
	outside := filepath.Join(tmp, "outside")
	must(t, os.MkdirAll(filepath.Join(outside, "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte(secret), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "dir", "secret"), []byte(secret), 0o644))
	ws, err := OpenWorkspace(filepath.Join(tmp, "ws"), -1, -1)
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	d := ws.Dir()
	must(t, os.MkdirAll(filepath.Join(d, "sub", "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(d, "sub", "file"), []byte("inside"), 0o644))
	links := map[string]string{
		"link_out":         outside,
		"link_secret":      filepath.Join(outside, "secret"),
		"link_up":          "../outside",
		"link_up_secret":   "../outside/secret",
		"chain1":           "chain2",
		"chain2":           "chain3",
		"chain3":           "link_up",
		"dangling":         filepath.Join(outside, "new-abs"),
		"dangling_rel":     "../outside/new-rel",
		"sub/up":           "../../outside",
		"sub/deep/up2":     "../../../outside/dir",
		"selfloop":         "selfloop",
		"ok_link":          "sub",
		"link_root":        "/",
		"link_real_etc":    "/etc",
		"link_real_passwd": "/etc/passwd",
		"link_proc":        "/proc/self/root",
		"link_ws_abs":      d + "/../outside",
	}
	for name, target := range links {
		must(t, os.Symlink(target, filepath.Join(d, name)))
	}
	return ws, outside
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every path and content under dir.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		b.WriteString(p)
		if d.Type().IsRegular() {
			c, _ := os.ReadFile(p)
			b.Write(c)
		}
		b.WriteByte('\n')
		return nil
	})
	return b.String()
}

// escapes is the corpus of paths that must never reach outside the
// workspace, through any operation.
var escapes = []string{
	"../outside/secret",
	"..",
	"../",
	"./../outside",
	"a/../../outside/secret",
	"sub/../../outside/secret",
	"sub/deep/../../../outside",
	"/etc/passwd",
	"//etc/passwd",
	"/",
	"/workspace/../outside/secret",
	"/workspace/../../etc/passwd",
	"/workspace2/secret",
	"/workspacex",
	"/workspace../x",
	"/work/space",
	"x\x00y",
	"/workspace/\x00",
	"link_out/secret",
	"link_out",
	"link_secret",
	"link_up/secret",
	"link_up",
	"link_up_secret",
	"chain1/secret",
	"chain1",
	"sub/up/secret",
	"sub/up/dir/secret",
	"sub/deep/up2/secret",
	"/workspace/link_out/secret",
	"/workspace/sub/up/secret",
	"ok_link/up/secret",
	"ok_link/../link_up/secret",
	"selfloop",
	"selfloop/x",
	"link_root/etc/passwd",
	"link_real_etc/passwd",
	"link_real_passwd",
	"link_proc/etc/passwd",
	"link_ws_abs/secret",
	"dangling/x",
	"dangling_rel/x",
}

// harmless are odd-looking names that stay inside (encoded dots are just
// names).
var harmless = []string{"%2e%2e/outside/secret", "..%2foutside", "\\..\\outside", "~/x", "...", "sub/./file", "/workspace/sub/file", "/workspace", ""}

func TestConfinementCorpus(t *testing.T) {
	t.Parallel()
	ws, outside := escapeFixture(t)
	before := snapshot(t, outside)
	passwd, _ := os.ReadFile("/etc/passwd")
	realOnly := func(p string) bool {
		return strings.Contains(p, "real") || strings.Contains(p, "proc") || strings.Contains(p, "link_root") || strings.HasPrefix(p, "/etc") || strings.HasPrefix(p, "//etc")
	}
	leaks := func(b []byte) bool {
		return bytes.Contains(b, []byte(secret)) || len(passwd) > 0 && bytes.Contains(b, passwd[:min(len(passwd), 20)])
	}
	for _, p := range escapes {
		t.Run(strings.ReplaceAll(p, "\x00", "NUL"), func(t *testing.T) {
			if b, err := ws.ReadFile(context.Background(), p, 0); err == nil || leaks(b) {
				t.Errorf("ReadFile(%q) = %q, %v", p, b, err)
			} else if _, rerr := Rel(p); rerr != nil && !errors.Is(err, ErrPathOutside) {
				t.Errorf("ReadFile(%q): err = %v, want ErrPathOutside", p, err)
			}
			if st, err := ws.Stat(context.Background(), p); err == nil && (st.Name == "secret" || st.Name == "passwd" || st.Name == "outside") {
				t.Errorf("Stat(%q) saw %+v", p, st)
			}
			if list, err := ws.ListDir(context.Background(), p); err == nil {
				for _, e := range list {
					if e.Name == "secret" || e.Name == "passwd" || e.Name == "dir" && p != "." {
						t.Errorf("ListDir(%q) saw outside entry %q", p, e.Name)
					}
				}
			}
			if realOnly(p) {
				return // never point mutating operations at the real /etc
			}
			_ = ws.WriteFile(context.Background(), p, []byte("pwned"), 0o644)
			_ = ws.WriteFile(context.Background(), path.Join(p, "pwned"), []byte("pwned"), 0o644)
			_ = ws.MkdirAll(context.Background(), path.Join(p, "newdir"))
			_ = ws.MkdirAll(context.Background(), p)
			_ = ws.Chown(context.Background(), p)
			_ = ws.RemoveAll(context.Background(), path.Join(p, "secret"))
			_ = ws.RemoveAll(context.Background(), p)
			if after := snapshot(t, outside); after != before {
				t.Fatalf("%q changed the outside:\nbefore:\n%s\nafter:\n%s", p, before, after)
			}
		})
	}
	for _, p := range escapes {
		if realOnly(p) {
			continue
		}
		// Each on a fresh fixture: a move changes which links exist.
		t.Run("move/"+strings.ReplaceAll(p, "\x00", "NUL"), func(t *testing.T) {
			ctx := context.Background()
			ws, outside := escapeFixture(t)
			before := snapshot(t, outside)
			_ = ws.Remove(ctx, path.Join(p, "secret"))
			_ = ws.Rename(ctx, path.Join(p, "secret"), "stolen")
			_ = ws.Rename(ctx, "sub/file", path.Join(p, "planted"))
			_, _ = ws.Copy(ctx, "sub/file", path.Join(p, "planted"))
			for _, dst := range []string{"copied", "copied-dir"} {
				_, _ = ws.Copy(ctx, path.Join(p, "secret"), dst)
				_, _ = ws.Copy(ctx, p, dst)
			}
			_ = ws.Remove(ctx, p)
			if after := snapshot(t, outside); after != before {
				t.Fatalf("%q changed the outside:\nbefore:\n%s\nafter:\n%s", p, before, after)
			}
			if in := snapshot(t, filepath.Join(ws.Dir(), "copied")) + snapshot(t, filepath.Join(ws.Dir(), "copied-dir")) + snapshot(t, filepath.Join(ws.Dir(), "stolen")); leaks([]byte(in)) {
				t.Fatalf("%q brought the outside in:\n%s", p, in)
			}
		})
	}
	for _, p := range harmless {
		if _, err := Rel(p); err != nil {
			t.Errorf("Rel(%q) = %v, want inside", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new-abs")); err == nil {
		t.Error("a dangling symlink created a file outside")
	}
	if b, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(b, passwd) {
		t.Fatal("/etc/passwd changed")
	}
}

func TestWorkspaceFileOps(t *testing.T) {
	t.Parallel()
	ws, _ := escapeFixture(t)
	must(t, ws.WriteFile(context.Background(), "/workspace/new/dir/f.txt", []byte("hello"), 0))
	b, err := ws.ReadFile(context.Background(), "new/dir/f.txt", 0)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read back %q, %v", b, err)
	}
	must(t, ws.WriteFile(context.Background(), "new/dir/f.txt", []byte("again"), 0o600)) // atomic replace
	b, _ = ws.ReadFile(context.Background(), "new/dir/f.txt", 0)
	if string(b) != "again" {
		t.Fatalf("replace: %q", b)
	}
	list, err := ws.ListDir(context.Background(), "new/dir")
	if err != nil || len(list) != 1 || list[0].Name != "f.txt" || list[0].Size != 5 || list[0].IsDir {
		t.Fatalf("list = %+v, %v (temp files must not linger)", list, err)
	}
	if b, err := ws.ReadFile(context.Background(), "ok_link/file", 0); err != nil || string(b) != "inside" {
		t.Errorf("symlink inside the workspace: %q, %v", b, err)
	}
	if _, err := ws.ReadFile(context.Background(), "missing", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	if err := ws.WriteFile(context.Background(), "sub/file/x", []byte("x"), 0); err == nil {
		t.Error("write under a file: no error")
	}
	if err := ws.RemoveAll(context.Background(), "/workspace"); err == nil {
		t.Error("removing the root: no error")
	}
	if err := ws.WriteFile(context.Background(), "", []byte("x"), 0); err == nil {
		t.Error("writing the root: no error")
	}
	must(t, ws.RemoveAll(context.Background(), "new"))
	if _, err := ws.Stat(context.Background(), "new"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after RemoveAll: %v", err)
	}
	must(t, ws.RemoveAll(context.Background(), "never-existed"))
	root, err := ws.ListDir(context.Background(), "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(root))
	for _, e := range root {
		names = append(names, e.Name)
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("unsorted: %v", names)
	}
}

func TestWorkspaceChownsForSandboxUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root (CI runs as root)") // a unit test, not an integration test
	}
	ws, err := OpenWorkspace(filepath.Join(t.TempDir(), "ws"), 1000, 1000)
	must(t, err)
	defer ws.Close()
	must(t, ws.WriteFile(context.Background(), "a/b/c.txt", []byte("x"), 0))
	for _, p := range []string{"", "a", "a/b", "a/b/c.txt"} {
		st, err := os.Stat(filepath.Join(ws.Dir(), p))
		must(t, err)
		if uid := fileUID(st); uid != 1000 {
			t.Errorf("%q owned by %d, want 1000", p, uid)
		}
	}
}

func FuzzRel(f *testing.F) {
	for _, p := range append(append([]string{}, escapes...), harmless...) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		r, err := Rel(p)
		if err != nil {
			if !errors.Is(err, ErrPathOutside) {
				t.Fatalf("Rel(%q) error %v does not wrap ErrPathOutside", p, err)
			}
			return
		}
		if r == "" || strings.HasPrefix(r, "/") || r == ".." || strings.HasPrefix(r, "../") || path.Clean(r) != r || strings.IndexByte(r, 0) >= 0 {
			t.Fatalf("Rel(%q) = %q: not a clean relative path inside", p, r)
		}
		if j := path.Join(Workdir, r); j != Workdir && !strings.HasPrefix(j, Workdir+"/") {
			t.Fatalf("Rel(%q) = %q joins to %q", p, r, j)
		}
	})
}

// FuzzResolve feeds arbitrary paths to the file operations of a workspace
// full of escaping symlinks: nothing outside may be read or changed.
func FuzzResolve(f *testing.F) {
	for _, p := range append(append([]string{}, escapes...), harmless...) {
		f.Add(p)
	}
	// Reads go to a workspace never written to, so any "secret" they see
	// came from outside; writes go to another one.
	ro, _ := escapeFixture(f)
	ws, outside := escapeFixture(f)
	before := snapshot(f, outside)
	f.Fuzz(func(t *testing.T, p string) {
		if b, err := ro.ReadFile(context.Background(), p, 0); err == nil && bytes.Contains(b, []byte(secret)) {
			t.Fatalf("ReadFile(%q) read the secret", p)
		}
		if list, err := ro.ListDir(context.Background(), p); err == nil {
			for _, e := range list {
				if e.Name == "secret" {
					t.Fatalf("ListDir(%q) listed outside", p)
				}
			}
		}
		if strings.Contains(p, "real") || strings.Contains(p, "proc") || strings.Contains(p, "root") {
			return
		}
		_ = ws.WriteFile(context.Background(), path.Join(p, "fz"), []byte("x"), 0)
		_ = ws.MkdirAll(context.Background(), path.Join(p, "fzd"))
		_ = ws.RemoveAll(context.Background(), path.Join(p, "secret"))
		if after := snapshot(t, outside); after != before {
			t.Fatalf("%q changed the outside", p)
		}
	})
}

func TestWorkspaceMoveOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ws, _ := escapeFixture(t)
	must(t, ws.WriteFile(ctx, "tree/a.txt", []byte("A"), 0o600))
	must(t, ws.WriteFile(ctx, "tree/deep/b.txt", []byte("BB"), 0))
	must(t, os.Symlink("a.txt", filepath.Join(ws.Dir(), "tree", "link")))

	n, err := ws.Copy(ctx, "tree", "copy")
	if err != nil || n != 4 {
		t.Fatalf("Copy(tree) = %d, %v; want 4 bytes", n, err)
	}
	for p, want := range map[string]string{"copy/a.txt": "A", "copy/deep/b.txt": "BB", "copy/link": "A"} {
		if b, err := ws.ReadFile(ctx, p, 0); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if st, _ := ws.Lstat(ctx, "copy/a.txt"); st.Mode.Perm() != 0o600 {
		t.Errorf("copied mode = %v, want 0600", st.Mode.Perm())
	}
	if _, err := ws.Copy(ctx, "tree", "tree/inner"); err == nil || !strings.Contains(err.Error(), "into itself") {
		t.Errorf("Copy into itself: %v", err)
	}
	must(t, os.Symlink("tree/deep", filepath.Join(ws.Dir(), "deeplink")))
	if _, err := ws.Copy(ctx, "deeplink", "x"); err != nil {
		t.Errorf("Copy of a symlink to a folder given as the source: %v", err)
	}
	must(t, os.Symlink("deep", filepath.Join(ws.Dir(), "tree", "dirlink")))
	if _, err := ws.Copy(ctx, "tree", "copy2"); err == nil || !strings.Contains(err.Error(), "symlink to a folder") {
		t.Errorf("Copy of a tree with a folder link: %v", err)
	}
	if _, err := ws.Copy(ctx, "missing", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Copy(missing) = %v, want ErrNotFound", err)
	}

	must(t, ws.Rename(ctx, "copy/a.txt", "moved/here/a.txt"))
	if _, err := ws.Stat(ctx, "copy/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Rename the source is still there: %v", err)
	}
	if b, _ := ws.ReadFile(ctx, "moved/here/a.txt", 0); string(b) != "A" {
		t.Errorf("renamed content = %q", b)
	}
	if err := ws.Rename(ctx, "copy", "copy/sub"); err == nil {
		t.Error("Rename into itself succeeded")
	}
	if err := ws.Rename(ctx, "nothing", "x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Rename(missing) = %v, want ErrNotFound", err)
	}
	if err := ws.Rename(ctx, ".", "x"); err == nil {
		t.Error("Rename of the root succeeded")
	}

	if err := ws.Remove(ctx, "copy"); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Remove(non-empty folder) = %v", err)
	}
	must(t, ws.Remove(ctx, "copy/link"))
	if _, err := ws.Stat(ctx, "copy/a.txt"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of a link touched something else: %v", err)
	}
	must(t, ws.Remove(ctx, "ok_link")) // the link, not its folder
	if _, err := ws.Stat(ctx, "sub/file"); err != nil {
		t.Errorf("Remove(link) followed it: %v", err)
	}
	if err := ws.Remove(ctx, "gone"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(missing) = %v, want ErrNotFound", err)
	}
	if err := ws.Remove(ctx, "/workspace"); err == nil {
		t.Error("Remove of the root succeeded")
	}
}
