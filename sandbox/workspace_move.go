package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// Remove removes the file, symlink or empty folder at p (a folder with
// entries is an error: RemoveAll removes a tree). A symlink is removed,
// never followed. A missing p is ErrNotFound; the workspace root cannot be
// removed.
func (w *Workspace) Remove(ctx context.Context, p string) error {
	rel, err := begin(ctx, "remove", p)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("remove %q: is the workspace root", p)
	}
	if err := w.root.Remove(rel); err != nil {
		if isNotEmpty(err) {
			return fmt.Errorf("remove %q: the folder is not empty (RemoveAll removes a folder with what is in it)", p)
		}
		return w.pathErr("remove", p, err)
	}
	return nil
}

// Rename moves the entry at from to to, both inside the workspace,
// replacing a file at to (a non-empty folder at to is an error). Missing
// parent folders of to are created. A symlink is moved, never followed.
func (w *Workspace) Rename(ctx context.Context, from, to string) error {
	src, err := begin(ctx, "rename", from)
	if err != nil {
		return err
	}
	dst, err := Rel(to)
	if err != nil {
		return fmt.Errorf("rename %q to %q: %w", from, to, err)
	}
	if src == "." || dst == "." {
		return fmt.Errorf("rename %q to %q: the workspace root cannot be moved or replaced", from, to)
	}
	if within(dst, src) {
		return fmt.Errorf("rename %q to %q: a folder cannot be moved into itself", from, to)
	}
	if _, err := w.root.Lstat(src); err != nil {
		return w.pathErr("rename", from, err)
	}
	if dir := path.Dir(dst); dir != "." {
		if err := w.MkdirAll(ctx, dir); err != nil {
			return err
		}
	}
	if err := w.root.Rename(src, dst); err != nil {
		if isNotEmpty(err) {
			return fmt.Errorf("rename %q to %q: %q is a folder that is not empty", from, to, to)
		}
		return w.pathErr("rename", from+" to "+to, err)
	}
	return nil
}

// Copy copies the file or folder at from to to, both inside the
// workspace; a folder is copied with everything in it, a file at to is
// replaced. Symlinks inside a copied folder are copied as the regular
// file they point to (inside the workspace; a link to a folder is
// refused, so a tree with a loop cannot be copied forever); FIFOs,
// sockets and devices are ErrSpecialFile. Every file goes through
// WriteFrom, so the copy is bounded by ctx and by the workspace's disk
// limit like any other write. It returns the number of bytes copied.
func (w *Workspace) Copy(ctx context.Context, from, to string) (int64, error) {
	src, err := begin(ctx, "copy", from)
	if err != nil {
		return 0, err
	}
	dst, err := Rel(to)
	if err != nil {
		return 0, fmt.Errorf("copy %q to %q: %w", from, to, err)
	}
	if dst == "." {
		return 0, fmt.Errorf("copy %q to %q: the workspace root cannot be replaced", from, to)
	}
	st, err := w.Stat(ctx, src)
	if err != nil {
		return 0, err
	}
	if st.IsDir && within(dst, src) {
		return 0, fmt.Errorf("copy %q to %q: a folder cannot be copied into itself", from, to)
	}
	return w.copyEntry(ctx, src, dst, st)
}

func (w *Workspace) copyEntry(ctx context.Context, src, dst string, st FileInfo) (int64, error) {
	if err := special("copy", src, st.Mode); err != nil {
		return 0, err
	}
	if !st.IsDir {
		f, err := w.Open(ctx, src)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return w.WriteFrom(ctx, dst, f, st.Mode.Perm())
	}
	if err := w.MkdirAll(ctx, dst); err != nil {
		return 0, err
	}
	entries, err := w.ListDir(ctx, src)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		s, d := path.Join(src, e.Name), path.Join(dst, e.Name)
		if e.Mode&fs.ModeSymlink != 0 {
			if e, err = w.Stat(ctx, s); err != nil {
				return n, err
			}
			if e.IsDir {
				return n, fmt.Errorf("copy %q: is a symlink to a folder, which is not copied", s)
			}
		}
		m, err := w.copyEntry(ctx, s, d, e)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// within reports whether the clean relative path p is dir or lies under it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
