package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// FileInfo describes one workspace entry.
type FileInfo struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
}

// Workspace is a chat's persistent folder on the host, with file operations
// confined to it: every path is resolved inside the folder, and a path that
// leaves it, directly or through a symlink (also a symlinked parent), fails
// with ErrPathOutside. Confinement is enforced by os.Root, which resolves
// each component relative to an open directory handle.
//
// Paths are relative to the workspace ("src/main.go", "./a") or absolute
// under Workdir ("/workspace/src/main.go"). A Workspace is safe for
// concurrent use.
type Workspace struct {
	dir  string
	root *os.Root
	// uid and gid own what the host creates (-1: leave as is), so the
	// non-root sandbox user can change it.
	uid, gid int
}

// OpenWorkspace opens the workspace folder dir, creating it when missing.
// Files and folders created through it are chowned to uid:gid unless uid
// is negative.
func OpenWorkspace(dir string, uid, gid int) (*Workspace, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("workspace create: %w", err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("workspace chown: %w", err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace open: %w", err)
	}
	return &Workspace{dir: dir, root: r, uid: uid, gid: gid}, nil
}

// Dir returns the workspace's host path.
func (w *Workspace) Dir() string { return w.dir }

// Close releases the workspace handle. It is idempotent.
func (w *Workspace) Close() error {
	if err := w.root.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}

// Rel turns a user path into a clean path relative to the workspace root
// ("." for the root itself). It rejects absolute paths outside Workdir and
// any path that climbs out with "..". Symlinks are checked when the path is
// used, not here.
func Rel(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%q: %w", p, ErrPathOutside)
	}
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		c := path.Clean(p)
		switch {
		case c == Workdir:
			return ".", nil
		case strings.HasPrefix(c, Workdir+"/"):
			p = strings.TrimPrefix(c, Workdir+"/")
		default:
			return "", fmt.Errorf("%q: %w", p, ErrPathOutside)
		}
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") || strings.HasPrefix(c, "/") {
		return "", fmt.Errorf("%q: %w", p, ErrPathOutside)
	}
	return c, nil
}

// ReadFile returns the content of the file at p.
func (w *Workspace) ReadFile(p string) ([]byte, error) {
	rel, err := Rel(p)
	if err != nil {
		return nil, err
	}
	b, err := w.root.ReadFile(rel)
	if err != nil {
		return nil, w.pathErr("read", p, err)
	}
	return b, nil
}

// WriteFile writes data to p atomically (a temporary file renamed over the
// target), creating missing parent folders.
func (w *Workspace) WriteFile(p string, data []byte, perm fs.FileMode) error {
	rel, err := Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("write %q: is the workspace root", p)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.MkdirAll(dir); err != nil {
			return err
		}
	}
	if perm == 0 {
		perm = 0o644
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return w.pathErr("write", p, err)
	}
	_, werr := f.Write(data)
	if werr == nil && w.uid >= 0 {
		werr = f.Chown(w.uid, w.gid)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = w.root.Rename(tmp, rel)
	}
	if werr != nil {
		_ = w.root.Remove(tmp)
		return w.pathErr("write", p, werr)
	}
	return nil
}

// MkdirAll creates the folder p and any missing parents.
func (w *Workspace) MkdirAll(p string) error {
	rel, err := Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	// Create one component at a time so each new folder can be chowned.
	parts := strings.Split(rel, "/")
	for i := range parts {
		sub := strings.Join(parts[:i+1], "/")
		err := w.root.Mkdir(sub, 0o755)
		switch {
		case err == nil:
			if w.uid >= 0 {
				if err := w.root.Lchown(sub, w.uid, w.gid); err != nil {
					return w.pathErr("mkdir", p, err)
				}
			}
		case errors.Is(err, fs.ErrExist):
			st, serr := w.root.Stat(sub)
			if serr != nil {
				return w.pathErr("mkdir", p, serr)
			}
			if !st.IsDir() {
				return fmt.Errorf("mkdir %q: %s is not a folder", p, sub)
			}
		default:
			return w.pathErr("mkdir", p, err)
		}
	}
	return nil
}

// Stat describes the entry at p (following symlinks inside the workspace).
func (w *Workspace) Stat(p string) (FileInfo, error) {
	rel, err := Rel(p)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := w.root.Stat(rel)
	if err != nil {
		return FileInfo{}, w.pathErr("stat", p, err)
	}
	return toInfo(st), nil
}

// ListDir lists the folder at p, sorted by name.
func (w *Workspace) ListDir(p string) ([]FileInfo, error) {
	rel, err := Rel(p)
	if err != nil {
		return nil, err
	}
	f, err := w.root.Open(rel)
	if err != nil {
		return nil, w.pathErr("list", p, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, w.pathErr("list", p, err)
	}
	out := make([]FileInfo, 0, len(entries))
	for _, e := range entries {
		st, err := e.Info()
		if err != nil {
			continue // removed while listing
		}
		out = append(out, toInfo(st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveAll removes p and everything under it. A missing p is not an error.
// The workspace root itself cannot be removed.
func (w *Workspace) RemoveAll(p string) error {
	rel, err := Rel(p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("remove %q: is the workspace root", p)
	}
	if err := w.root.RemoveAll(rel); err != nil {
		return w.pathErr("remove", p, err)
	}
	return nil
}

// Root exposes the confined handle for callers that need more than the
// methods above (copying trees). It stays owned by the Workspace.
func (w *Workspace) Root() *os.Root { return w.root }

// Chown gives rel to the sandbox user, when the workspace has one.
func (w *Workspace) Chown(p string) error {
	if w.uid < 0 {
		return nil
	}
	rel, err := Rel(p)
	if err != nil {
		return err
	}
	return w.pathErr("chown", p, w.root.Lchown(rel, w.uid, w.gid))
}

func toInfo(st fs.FileInfo) FileInfo {
	return FileInfo{Name: st.Name(), Size: st.Size(), IsDir: st.IsDir(), ModTime: st.ModTime().UTC()}
}

// pathErr maps os.Root's errors to the package's sentinels, keeping the
// user's path (never the host path) in the message.
func (w *Workspace) pathErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %q: %w", op, p, ErrNotFound)
	case isEscape(err):
		return fmt.Errorf("%s %q: %w", op, p, ErrPathOutside)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s %q: %w", op, p, pe.Err)
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return fmt.Errorf("%s %q: %w", op, p, le.Err)
	}
	return fmt.Errorf("%s %q: %w", op, p, err)
}

// isEscape reports os.Root's "path escapes from parent" error, which has no
// exported sentinel.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
