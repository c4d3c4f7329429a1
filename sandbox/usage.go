package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// WorkspaceInfo describes one workspace, for listings.
type WorkspaceInfo struct {
	User    string    `json:"user"`
	Chat    string    `json:"chat"`
	LastUse time.Time `json:"last_use"`
	// InUse: a request of this or another process has it acquired.
	InUse bool `json:"in_use"`
	// Bytes is what the workspace takes on the host's disk: its image's
	// allocated blocks, or its files' blocks for a folder.
	Bytes int64 `json:"bytes"`
	// Used is what its files take inside its image, when the image is
	// mounted (0 otherwise).
	Used int64 `json:"used,omitempty"`
	// Limit is its image's size: the disk limit it was last acquired with
	// (0: a folder without a limit).
	Limit int64 `json:"limit,omitempty"`
	// Mounted: its image is mounted (it is in use, or a crash left it).
	Mounted bool `json:"mounted,omitempty"`
}

// DataUsage is what a data root takes on the host.
type DataUsage struct {
	// Root is the data root.
	Root string `json:"root"`
	// Bytes is what everything under it takes on disk: workspaces, images
	// (at their allocated size), the store. Mounted images are counted
	// once, as images.
	Bytes int64 `json:"bytes"`
	// Workspaces counts the workspaces; WorkspaceBytes sums their Bytes.
	Workspaces     int   `json:"workspaces"`
	WorkspaceBytes int64 `json:"workspace_bytes"`
	// Mounted counts the workspace images mounted now, and LoopDevices
	// the loop devices attached to images under the data root (see
	// DiskMounts).
	Mounted     int `json:"mounted"`
	LoopDevices int `json:"loop_devices"`
	// FSSize and FSAvail describe the host filesystem holding the data
	// root.
	FSSize  int64 `json:"fs_size"`
	FSAvail int64 `json:"fs_avail"`
}

// List describes every workspace, sorted by user and chat. It only looks:
// it mounts, locks and creates nothing (in use is seen by trying the
// marker's lock without waiting). ctx ending stops it.
func (w *Workspaces) List(ctx context.Context) ([]WorkspaceInfo, error) {
	users, err := os.ReadDir(w.root)
	if err != nil {
		return nil, fmt.Errorf("workspaces: %w", err)
	}
	out := []WorkspaceInfo{}
	for _, u := range users {
		if !u.IsDir() || ValidateID("user", u.Name()) != nil {
			continue
		}
		cands, err := (&pruner{root: w.root}).scanUser(u.Name(), true)
		if err != nil {
			return out, err
		}
		for _, c := range cands {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			out = append(out, w.describe(ctx, c))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].User != out[j].User {
			return out[i].User < out[j].User
		}
		return out[i].Chat < out[j].Chat
	})
	return out, nil
}

func (w *Workspaces) describe(ctx context.Context, c pruneCandidate) WorkspaceInfo {
	info := WorkspaceInfo{User: c.user, Chat: c.chat, LastUse: c.lastUse.UTC()}
	dir := filepath.Join(w.root, c.user, c.chat)
	info.InUse = w.InUse(c.user, c.chat) || markerLocked(markerPath(w.root, c.user, c.chat))
	if st, err := os.Lstat(imagePath(w.root, c.user, c.chat)); err == nil {
		info.Bytes, info.Limit = diskBytes(st), st.Size()
		if dev, _ := mountedDevice(dir); dev != "" {
			info.Mounted = true
			if sp, err := fsSpace(dir); err == nil {
				// Writes not yet flushed to the image count already.
				info.Used = sp.used
				info.Bytes = max(info.Bytes, sp.used)
			}
		}
		return info
	}
	_, info.Bytes, _ = treeUsage(ctx, dir)
	return info
}

// UserUsage is what one user's workspaces take.
type UserUsage struct {
	// Workspaces counts them; Bytes sums what each takes on the host's
	// disk (WorkspaceInfo.Bytes).
	Workspaces int   `json:"workspaces"`
	Bytes      int64 `json:"bytes"`
}

// UserUsage reports what the workspaces of user take, as List measures
// them: a stat of each disk image, a walk of each plain folder. It only
// looks. ctx ending stops it.
func (w *Workspaces) UserUsage(ctx context.Context, user string) (UserUsage, error) {
	if err := ValidateID("user", user); err != nil {
		return UserUsage{}, err
	}
	cands, err := (&pruner{root: w.root}).scanUser(user, true)
	if err != nil {
		return UserUsage{}, err
	}
	var u UserUsage
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return u, err
		}
		u.Workspaces++
		u.Bytes += w.describe(ctx, c).Bytes
	}
	return u, nil
}

// DiskSize returns the size of the filesystem that holds the workspaces,
// in bytes.
func (w *Workspaces) DiskSize() (int64, error) {
	sp, err := fsSpace(w.root)
	if err != nil {
		return 0, fmt.Errorf("workspaces: %w", err)
	}
	return sp.size, nil
}

// Exists reports whether (user, chat) has a workspace: its folder or its
// disk image.
func (w *Workspaces) Exists(user, chat string) bool {
	dir, err := w.Path(user, chat)
	if err != nil {
		return false
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return true
	}
	_, err = os.Lstat(imagePath(w.root, user, chat))
	return err == nil
}

// markerLocked reports whether someone holds the lock of the marker m.
func markerLocked(m string) bool {
	f, err := os.Open(m)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	return false // closing drops the lock at once
}

// Usage reports what the data root holding the workspaces takes on the
// host (for `agentbox workspaces list` and the server's metrics). It
// walks the whole data root (without entering mounted images), so it
// takes as long as a du of it. ctx ending stops it.
func (w *Workspaces) Usage(ctx context.Context) (*DataUsage, error) {
	dataRoot := filepath.Dir(w.root)
	u := &DataUsage{Root: dataRoot}
	if sp, err := fsSpace(dataRoot); err == nil {
		u.FSSize, u.FSAvail = sp.size, sp.avail
	}
	_, total, err := treeUsage(ctx, dataRoot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("data root usage: %w", err)
	}
	u.Bytes = total
	list, err := w.List(ctx)
	if err != nil {
		return nil, err
	}
	m := w.DiskMounts()
	u.Mounted, u.LoopDevices = m.Mounted, m.LoopDevices
	for _, i := range list {
		u.Workspaces++
		u.WorkspaceBytes += i.Bytes
		if i.Mounted {
			// What the walk saw of the image, less what is written to it
			// and not yet flushed.
			u.Bytes += max(0, i.Bytes-imageBytes(imagePath(w.root, i.User, i.Chat)))
		}
	}
	return u, nil
}

// DiskMounts is what the workspace images of a data root hold on the host
// now.
type DiskMounts struct {
	// Mounted counts the mounts under the workspaces folder: images
	// mounted for a request, a terminal, a look at the files, kept
	// mounted by a server between turns, or left by a process that died
	// (the next start unmounts those).
	Mounted int `json:"mounted"`
	// LoopDevices counts the loop devices attached to images under the
	// data root: one per mounted image, plus one for each image a
	// sandbox's mount namespace still holds after its host mount went (the
	// kernel detaches it when that sandbox is gone).
	LoopDevices int `json:"loop_devices"`
}

// DiskMounts counts the mounts and loop devices the data root's images
// hold, from the mount table and sysfs: cheap enough for every metrics
// scrape. It only looks.
func (w *Workspaces) DiskMounts() DiskMounts {
	roots := []string{w.root}
	if r, err := filepath.EvalSymlinks(w.root); err == nil && r != w.root {
		roots = append(roots, r) // the kernel shows resolved paths
	}
	var m DiskMounts
	for _, root := range roots {
		m.Mounted += len(mountsUnder(root))
		for _, l := range loopDevices() {
			if strings.HasPrefix(l.backing, root+string(filepath.Separator)) {
				m.LoopDevices++
			}
		}
	}
	return m
}

// RecoverReport says what Recover cleaned up.
type RecoverReport struct {
	// Unmounted lists the workspaces ("user/chat") a crashed process left
	// mounted.
	Unmounted []string `json:"unmounted,omitempty"`
	// Detached lists loop devices left attached to images under the data
	// root with nothing mounting them here.
	Detached []string `json:"detached,omitempty"`
	// Removed lists leftover files: half-made images, probes.
	Removed []string `json:"removed,omitempty"`
}

// Recover cleans what an earlier process left of workspace disks: images
// still mounted that no live process holds (unmounted, or, when used
// within KeepMounted, kept until then as if released here), loop devices
// attached to images under the data root that nothing here mounts (a
// device still mounted in another mount namespace, a leftover
// container's, is detached by the kernel when that goes), half-made
// images and probes. It also closes the folders an earlier version made
// readable by every user of the host (user folders and workspaces get
// their modes, see Workspaces). A server calls it once at start, before it
// serves. Errors on single items do not stop it; they are joined.
func (w *Workspaces) Recover(ctx context.Context) (*RecoverReport, error) {
	rep := &RecoverReport{}
	var errs []error
	mounted := map[string]bool{} // device numbers mounted here, left so
	ents, err := os.ReadDir(w.root)
	if err != nil {
		return rep, fmt.Errorf("recover: %w", err)
	}
	for _, u := range ents {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		name := u.Name()
		p := filepath.Join(w.root, name)
		if strings.HasPrefix(name, ".probe-") {
			// DetectDiskMode's, from a process that stopped mid-probe.
			if u.IsDir() {
				_ = unmount(p)
			}
			if err := os.RemoveAll(p); err == nil {
				rep.Removed = append(rep.Removed, name)
			}
			continue
		}
		if !u.IsDir() || ValidateID("user", name) != nil {
			continue
		}
		errs = append(errs, w.recoverUser(name, rep, mounted))
	}
	for _, l := range loopDevices() {
		if mounted[l.number] || !strings.HasPrefix(l.backing, w.root+string(filepath.Separator)) {
			continue
		}
		if err := detachLoop(l.dev); err != nil {
			errs = append(errs, fmt.Errorf("recover: detach %s: %w", l.dev, err))
			continue
		}
		rep.Detached = append(rep.Detached, l.dev)
	}
	return rep, errors.Join(errs...)
}

func (w *Workspaces) recoverUser(user string, rep *RecoverReport, mounted map[string]bool) error {
	udir := filepath.Join(w.root, user)
	var errs []error
	if err := w.guardDir(udir); err != nil {
		errs = append(errs, fmt.Errorf("recover: %w", err))
	}
	ents, err := os.ReadDir(udir)
	if err != nil {
		return errors.Join(errs...)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") && strings.Contains(name, imageSuffix+".") {
			// A half-made image (.tmp-), or a shrink's copy (.new-) and
			// mount point (.shrink-), from a process that stopped. One
			// a live process is making holds its chat's lock: spared.
			chat, _, _ := strings.Cut(name[1:], imageSuffix+".")
			if w.InUse(user, chat) || markerLocked(markerPath(w.root, user, chat)) {
				continue
			}
			p := filepath.Join(udir, name)
			if e.IsDir() {
				_ = unmount(p)
			}
			if err := os.RemoveAll(p); err == nil {
				rep.Removed = append(rep.Removed, user+"/"+name)
			}
			continue
		}
		if !e.IsDir() || ValidateID("chat", name) != nil {
			continue
		}
		dir := filepath.Join(udir, name)
		if st, err := os.Lstat(dir); err == nil && st.Mode().Perm()&0o077 != 0 {
			if err := os.Chmod(dir, st.Mode().Perm()&0o700); err != nil {
				errs = append(errs, fmt.Errorf("recover: %w", err))
			}
		}
		dev, err := mountedDevice(dir)
		if err != nil || dev == "" {
			continue
		}
		if w.InUse(user, name) || markerLocked(markerPath(w.root, user, name)) {
			mounted[dev] = true // a live process uses it
			continue
		}
		var lastUse time.Time
		if st, err := os.Stat(markerPath(w.root, user, name)); err == nil {
			lastUse = st.ModTime()
		}
		if w.adoptIdle(user, name, lastUse) {
			if d, _ := mountedDevice(dir); d != "" {
				mounted[dev] = true // kept mounted for now, or busy
				if time.Since(lastUse) >= w.keep {
					errs = append(errs, fmt.Errorf("recover %s/%s: could not unmount (see the log)", user, name))
				}
				continue
			}
		}
		rep.Unmounted = append(rep.Unmounted, user+"/"+name)
	}
	return errors.Join(errs...)
}
