package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// A CLI may read configuration from the workspace that none of its
// switches turns off (executor.Hider): a runtime hides those names of the
// workspace's root (Spec.Hide) behind empty, read-only mounts, so that the
// agent can neither change them nor see what the host has there, and a run
// reads nothing of them. Only what exists when the sandbox is made is
// hidden: a name the agent makes later is hidden from the sandboxes that
// follow (kept chats of CLIs that do not stay up between turns get a new
// sandbox for each), and nothing is added to the workspace.

// Hidden is one name of Spec.Hide as a runtime mounts it.
type Hidden struct {
	// Target is its path inside the sandbox, under Workdir.
	Target string
	// Folder: it is shown as an empty folder (a name ending in "/");
	// otherwise as an empty file.
	Folder bool
}

// CheckHide checks hide: names at the workspace's root, each once, a
// folder's ending in "/".
func CheckHide(hide []string) error {
	seen := map[string]bool{}
	for _, h := range hide {
		name, _ := strings.CutSuffix(h, "/")
		switch {
		case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
			return fmt.Errorf("hide %q: want a name at the workspace's root (a folder's ending in /)", h)
		case seen[name]:
			return fmt.Errorf("hide %q: named twice", h)
		}
		seen[name] = true
	}
	return nil
}

// PrepareHide checks hide (CheckHide) and returns what a runtime mounts
// over for it in ws, in order: each name that is there as a folder (a name
// ending in "/") or as a regular file. A symlink in its place, which the
// CLI would follow to configuration elsewhere, is removed; anything else
// there (a file where a folder is hidden, a folder where a file is, a
// special file) is left as it is, as no CLI reads configuration from it.
// What the host has there stays.
func PrepareHide(ctx context.Context, ws *Workspace, hide []string) ([]Hidden, error) {
	if err := CheckHide(hide); err != nil {
		return nil, err
	}
	var out []Hidden
	for _, h := range hide {
		name, folder := strings.CutSuffix(h, "/")
		st, err := ws.Lstat(ctx, name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("hide %q: %w", h, err)
		case st.Mode&fs.ModeSymlink != 0:
			if err := ws.RemoveAll(ctx, name); err != nil {
				return nil, fmt.Errorf("hide %q: %w", h, err)
			}
		case folder && st.Mode.IsDir(), !folder && st.Mode.IsRegular():
			out = append(out, Hidden{Target: Workdir + "/" + name, Folder: folder})
		}
	}
	return out, nil
}

var emptyMu sync.Mutex

// EmptyFile returns the path of an empty, read-only file on this host that
// a runtime binds over the hidden files of a workspace: one per user of
// the host, in the temporary folder, made again when it went or is not
// what it must be.
func EmptyFile() (string, error) {
	emptyMu.Lock()
	defer emptyMu.Unlock()
	uid := os.Geteuid()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("agentbox-empty-%d", uid))
	p := filepath.Join(dir, "empty")
	if ours(dir, uid, true) && ours(p, uid, false) {
		return p, nil
	}
	_ = os.RemoveAll(p)
	if err := os.Mkdir(dir, 0o711); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("empty file: %w", err)
	}
	// Traversable by the sandbox user (a runtime may bind as that user).
	if !ours(dir, uid, true) || os.Chmod(dir, 0o711) != nil {
		return "", fmt.Errorf("empty file: %s is not a folder of this user's", dir)
	}
	tmp, err := os.CreateTemp(dir, ".empty-")
	if err != nil {
		return "", fmt.Errorf("empty file: %w", err)
	}
	tmp.Close()
	if err := os.Chmod(tmp.Name(), 0o444); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("empty file: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		_ = os.Remove(tmp.Name())
		return "", fmt.Errorf("empty file: %w", err)
	}
	return p, nil
}

// ours reports whether p is a folder (or an empty regular file) owned by
// uid and not a symlink.
func ours(p string, uid int, folder bool) bool {
	st, err := os.Lstat(p)
	if err != nil {
		return false
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(s.Uid) != uid {
		return false
	}
	if folder {
		return st.IsDir()
	}
	return st.Mode().IsRegular() && st.Size() == 0 && st.Mode().Perm()&0o222 == 0
}
