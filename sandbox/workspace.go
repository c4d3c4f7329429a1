package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"
)

// FileInfo describes one workspace entry.
type FileInfo struct {
	Name    string    `json:"name"`
	Size    int64     `json:"size"`
	IsDir   bool      `json:"is_dir"`
	ModTime time.Time `json:"mod_time"`
	// Mode is the entry's type and permission bits (fs.ModeSymlink for
	// Lstat of a link, fs.ModeNamedPipe for a FIFO, ...).
	Mode fs.FileMode `json:"-"`
}

// Workspace is a chat's persistent folder on the host, with file operations
// confined to it: every path is resolved inside the folder, and a path that
// leaves it, directly or through a symlink (also a symlinked parent), fails
// with ErrPathOutside. Confinement is enforced by os.Root, which resolves
// each component relative to an open directory handle.
//
// The folder belongs to the agent, who may plant anything in it while the
// host works on it, so every operation takes the caller's ctx and none
// blocks past it: only regular files and folders are ever opened (a FIFO,
// socket or device is refused with ErrSpecialFile before and after the
// open, which is non-blocking), reads and writes go in chunks that check
// ctx, and writes never open an existing file (they rename a new one over
// it). A file larger than a read's limit is ErrFileTooLarge; a write that
// meets the workspace's disk limit is ErrDiskFull.
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
	// disk is the workspace's disk limit, when Workspaces gave it one.
	disk DiskLimit
	// opened is when it was opened, by its filesystem's clock (the
	// folder's change time once chmod touched it): files changed since
	// are this holder's sandbox's (see WatchDisk).
	opened time.Time
}

// OpenWorkspace opens the workspace folder dir, creating it when missing;
// the folder is its owner's alone (0700). Files and folders created
// through it are chowned to uid:gid, and so is the folder, unless uid is
// negative.
func OpenWorkspace(dir string, uid, gid int) (*Workspace, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace create: %w", err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("workspace chown: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("workspace chmod: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace open: %w", err)
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace open: %w", err)
	}
	return &Workspace{dir: dir, root: r, uid: uid, gid: gid, opened: changeTime(st)}, nil
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

// begin resolves p for op, after checking that ctx is still live.
func begin(ctx context.Context, op, p string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s %q: %w", op, p, err)
	}
	return Rel(p)
}

// MkdirAll creates the folder p and any missing parents. An entry in the
// way that is not a folder (a file, FIFO, or a symlink to one) is an
// error; a symlink to a folder inside the workspace is followed.
func (w *Workspace) MkdirAll(ctx context.Context, p string) error {
	rel, err := begin(ctx, "mkdir", p)
	if err != nil {
		return err
	}
	if rel == "." {
		return nil
	}
	// Create one component at a time so each new folder can be chowned.
	parts := strings.Split(rel, "/")
	for i := range parts {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mkdir %q: %w", p, err)
		}
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

// Stat describes the entry at p, following symlinks inside the workspace.
// It never opens the entry, so a special file is described, not refused
// (its FileInfo.Mode says which kind it is).
func (w *Workspace) Stat(ctx context.Context, p string) (FileInfo, error) {
	rel, err := begin(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := w.root.Stat(rel)
	if err != nil {
		return FileInfo{}, w.pathErr("stat", p, err)
	}
	return toInfo(st), nil
}

// Lstat describes the entry at p without following a symlink in its last
// component.
func (w *Workspace) Lstat(ctx context.Context, p string) (FileInfo, error) {
	rel, err := begin(ctx, "lstat", p)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := w.root.Lstat(rel)
	if err != nil {
		return FileInfo{}, w.pathErr("lstat", p, err)
	}
	return toInfo(st), nil
}

// RemoveAll removes p and everything under it, never following symlinks.
// A missing p is not an error. The workspace root itself cannot be
// removed. ctx is checked before it starts: removal only unlinks, which
// no special file can block.
func (w *Workspace) RemoveAll(ctx context.Context, p string) error {
	rel, err := begin(ctx, "remove", p)
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

// Chmod changes the permission bits of p (following symlinks inside the
// workspace).
func (w *Workspace) Chmod(ctx context.Context, p string, mode fs.FileMode) error {
	rel, err := begin(ctx, "chmod", p)
	if err != nil {
		return err
	}
	return w.pathErr("chmod", p, w.root.Chmod(rel, mode))
}

// Chown gives p to the sandbox user, when the workspace has one. A
// symlink itself is chowned, not its target.
func (w *Workspace) Chown(ctx context.Context, p string) error {
	if w.uid < 0 {
		return nil
	}
	rel, err := begin(ctx, "chown", p)
	if err != nil {
		return err
	}
	return w.pathErr("chown", p, w.root.Lchown(rel, w.uid, w.gid))
}

func toInfo(st fs.FileInfo) FileInfo {
	return FileInfo{Name: st.Name(), Size: st.Size(), IsDir: st.IsDir(), ModTime: st.ModTime().UTC(), Mode: st.Mode()}
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
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%s %q: %w%s", op, p, ErrDiskFull, w.disk.hint())
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
