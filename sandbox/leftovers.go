package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"syscall"
)

// tmpName matches the temporary files WriteFile writes before it renames
// them over their target: ".NAME.tmp-" and 12 hex digits.
var tmpName = regexp.MustCompile(`^\..+\.tmp-[0-9a-f]{12}$`)

// CleanRunFiles removes what runs of a crashed server left in workspaces:
// files (paths relative to a workspace) that executors write for one run
// and remove when it ends, such as a system prompt file, and WriteFile's
// half-written temporary files at the workspace's top and in those files'
// folders. It visits only workspaces nobody uses: one this process has
// acquired, or another process has (a shared lock on its last-use marker),
// is left alone. Nothing is followed or opened that the agent could have
// made a special file: entries are removed, folders listed only when they
// are folders. It returns how many files it removed; one workspace's
// failure does not stop it (the errors are joined), ctx ending does.
func (w *Workspaces) CleanRunFiles(ctx context.Context, files []string) (int, error) {
	dirs := map[string]bool{".": true}
	for _, f := range files {
		rel, err := Rel(f)
		if err != nil || rel == "." {
			return 0, fmt.Errorf("clean run files: %q: not a path inside a workspace", f)
		}
		dirs[path.Dir(rel)] = true
	}
	users, err := os.ReadDir(w.root)
	if err != nil {
		return 0, fmt.Errorf("clean run files: %w", err)
	}
	n := 0
	var errs []error
	for _, u := range users {
		if !u.IsDir() || ValidateID("user", u.Name()) != nil {
			continue
		}
		chats, err := os.ReadDir(filepath.Join(w.root, u.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("clean run files: %w", err))
			continue
		}
		for _, c := range chats {
			if err := ctx.Err(); err != nil {
				return n, errors.Join(append(errs, err)...)
			}
			if !c.IsDir() || ValidateID("chat", c.Name()) != nil || w.InUse(u.Name(), c.Name()) {
				continue
			}
			k, err := w.cleanOne(u.Name(), c.Name(), files, dirs)
			n += k
			if err != nil {
				errs = append(errs, fmt.Errorf("clean run files of %s/%s: %w", u.Name(), c.Name(), err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// cleanOne cleans one workspace while it holds the exclusive lock of its
// marker (creating the marker for that time when there is none, so an
// Acquire racing with it waits).
func (w *Workspaces) cleanOne(user, chat string, files []string, dirs map[string]bool) (int, error) {
	marker := w.marker(user, chat)
	created := false
	f, err := os.Open(marker)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(marker, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
		created = err == nil
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return 0, nil // made meanwhile: someone is acquiring it
		}
		return 0, err
	}
	defer f.Close()
	if created {
		// A marker's time is the workspace's last use: this one only
		// existed for the lock.
		defer os.Remove(marker)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return 0, nil // another process uses it
		}
		return 0, err
	}
	if !samePath(f, marker) {
		return 0, nil // replaced meanwhile: in use
	}
	root, err := os.OpenRoot(filepath.Join(w.root, user, chat))
	if err != nil {
		return 0, err
	}
	defer root.Close()
	n := 0
	var errs []error
	remove := func(rel string) {
		st, err := root.Lstat(rel)
		if err != nil || st.IsDir() {
			return
		}
		if err := root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			return
		}
		n++
	}
	for _, rel := range files {
		remove(path.Clean(rel))
	}
	for dir := range dirs {
		if st, err := root.Lstat(dir); err != nil || !st.IsDir() {
			continue
		}
		d, err := root.Open(dir)
		if err != nil {
			continue
		}
		ents, err := d.ReadDir(-1)
		d.Close()
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Type().IsRegular() && tmpName.MatchString(e.Name()) {
				remove(path.Join(dir, e.Name()))
			}
		}
	}
	return n, errors.Join(errs...)
}
