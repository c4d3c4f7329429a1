package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// diskState is one workspace's image as this process uses it (DiskLoop).
type diskState struct {
	// sem serializes attaching and detaching the workspace in this
	// process.
	sem chan struct{}
	// users counts acquisitions holding or waiting for the state (guarded
	// by Workspaces.mu); the state is dropped at zero.
	users int
	// holders counts acquisitions attached (guarded by sem): the first
	// mounts, the last unmounts (at once, or when idle lets it expire).
	holders int
	limit   DiskLimit
	// idle is the pending unmount of an image kept mounted after its last
	// release (guarded by sem); while set, it counts as a user.
	idle *idleTimer
}

// idleTimer is a pending idle unmount; its identity tells a stale one.
type idleTimer struct{ t *time.Timer }

// migrateSlack is what an image made from an existing folder gets beyond
// its files when they do not fit in the limit.
const migrateSlack = 64 << 20

// attach gives the acquisition of (user, chat) its disk, as w's mode
// says, and returns the limit that applies and the detach to call on
// release. lock is the acquisition's marker, share-locked.
func (w *Workspaces) attach(ctx context.Context, lock *os.File, user, chat, dir string, maxDisk int64) (DiskLimit, func(), error) {
	img := imagePath(w.root, user, chat)
	if w.disk != DiskLoop {
		if _, err := os.Lstat(img); err == nil {
			return DiskLimit{}, nil, errors.New("it is a disk image (made by a server with disk limits), and this process cannot mount it: run it as root on Linux, with loop devices and e2fsprogs")
		}
		if maxDisk > 0 && w.disk == DiskWatch {
			return DiskLimit{Bytes: maxDisk, Mode: DiskWatch}, func() {}, nil
		}
		return DiskLimit{}, func() {}, nil
	}
	key := user + "/" + chat
	ds := w.diskState(key)
	put := func() { w.putDiskState(key, ds) }
	select {
	case ds.sem <- struct{}{}:
	case <-ctx.Done():
		put()
		return DiskLimit{}, nil, ctx.Err()
	}
	w.cancelIdle(key, ds)
	if ds.holders == 0 {
		lim, err := w.mountDisk(ctx, lock, user, chat, dir, img, maxDisk)
		if err != nil {
			<-ds.sem
			put()
			return DiskLimit{}, nil, err
		}
		ds.limit = lim
	}
	ds.holders++
	lim := ds.limit
	<-ds.sem
	detach := func() {
		ds.sem <- struct{}{}
		if ds.holders--; ds.holders == 0 && ds.limit.Mode == DiskLoop {
			if w.keep > 0 {
				w.scheduleIdle(user, chat, ds, w.keep)
			} else {
				w.unmountDisk(lock, user, chat, dir)
			}
		}
		<-ds.sem
		put()
	}
	return lim, detach, nil
}

// mountDisk makes sure the workspace's image exists at the wanted size
// and is mounted at dir. It holds the user folder's lock meanwhile, so
// two processes never mount one image twice.
func (w *Workspaces) mountDisk(ctx context.Context, lock *os.File, user, chat, dir, img string, maxDisk int64) (DiskLimit, error) {
	unlock, err := lockDir(ctx, filepath.Dir(dir))
	if err != nil {
		return DiskLimit{}, fmt.Errorf("disk: %w", err)
	}
	defer unlock()
	var want int64
	if maxDisk > 0 {
		want = alignImage(maxDisk)
	}
	st, err := os.Lstat(img)
	if errors.Is(err, fs.ErrNotExist) {
		if want == 0 {
			return DiskLimit{}, nil // a folder without a limit stays one
		}
		lim, made, merr := w.makeDisk(ctx, lock, user, chat, dir, img, want)
		if merr != nil || !made {
			return lim, merr
		}
		// Made at the size it needs: not to be resized now.
		want = 0
		st, err = os.Lstat(img)
	}
	if err != nil {
		return DiskLimit{}, fmt.Errorf("disk image: %w", err)
	}
	if !st.Mode().IsRegular() {
		return DiskLimit{}, fmt.Errorf("disk image %s is not a regular file", img)
	}
	dev, err := loopFor(img)
	if err != nil {
		return DiskLimit{}, fmt.Errorf("disk image: %w", err)
	}
	mounted, err := mountedDevice(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return DiskLimit{}, fmt.Errorf("disk: %w", err)
	}
	if mounted == "" && dev != "" {
		// Attached but not mounted here: the kernel may still be
		// detaching it after the last unmount (or a forked process holds
		// it for a moment).
		dev = waitDetached(img)
	}
	if mounted != "" && dev != "" && mounted == deviceNumber(dev) && want > 0 && st.Size() != want && tryExclusive(lock) {
		// Kept mounted since its last turn (or left so), and its limit
		// changed: unmounted, so that it can be resized, unless it is busy.
		uerr := unmount(dir)
		share(lock)
		if uerr == nil {
			dev = waitDetached(img)
			if mounted, err = mountedDevice(dir); err != nil {
				return DiskLimit{}, fmt.Errorf("disk: %w", err)
			}
		}
	}
	switch {
	case mounted != "" && dev != "" && mounted == deviceNumber(dev):
		// Mounted already: kept since its last turn, by another process,
		// or left by a crash.
		return DiskLimit{Bytes: st.Size(), Mode: DiskLoop}, nil
	case mounted != "":
		return DiskLimit{}, fmt.Errorf("disk: something other than the workspace's image is mounted at its folder (device %s)", mounted)
	case dev == "" && want > 0 && st.Size() != want:
		// Nothing has it attached, so it can be resized offline.
		if err := resizeImage(ctx, img, want, w.uid, w.gid); err != nil {
			w.log.Warn("workspace disk image not resized; it keeps its size", "user", user, "chat", chat,
				"size", st.Size(), "limit", want, "error", err)
		}
		if st, err = os.Lstat(img); err != nil {
			return DiskLimit{}, fmt.Errorf("disk image: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DiskLimit{}, fmt.Errorf("disk: mount point: %w", err)
	}
	if err := mountImage(img, dir); err != nil {
		return DiskLimit{}, fmt.Errorf("disk: %w", err)
	}
	removeLostFound(dir)
	// The image's root is the workspace folder now: its owner's alone,
	// as a folder workspace is (mkfs makes it 0755).
	if err := os.Chmod(dir, 0o700); err != nil {
		return DiskLimit{}, fmt.Errorf("disk: %w", err)
	}
	return DiskLimit{Bytes: st.Size(), Mode: DiskLoop}, nil
}

// makeDisk creates the workspace's image of want bytes: empty for a new
// (or empty) workspace, else with a copy of its folder, which the image
// then replaces. A folder is copied only when no one else uses the
// workspace; otherwise made is false and the limit is watched this time.
func (w *Workspaces) makeDisk(ctx context.Context, lock *os.File, user, chat, dir, img string, want int64) (lim DiskLimit, made bool, err error) {
	empty, err := dirEmpty(dir)
	if err != nil {
		return DiskLimit{}, false, fmt.Errorf("disk: %w", err)
	}
	if empty {
		if err := makeImage(ctx, img, want, w.uid, w.gid, ""); err != nil {
			return DiskLimit{}, false, err
		}
		return DiskLimit{}, true, nil
	}
	// An existing folder, from before the limit. Copy it only when this
	// acquisition is the one user (its shared lock the only lock).
	if !tryExclusive(lock) {
		w.log.Info("workspace in use elsewhere: its folder becomes a disk image on a later acquire; the limit is watched meanwhile", "user", user, "chat", chat)
		return DiskLimit{Bytes: want, Mode: DiskWatch}, false, nil
	}
	defer share(lock)
	_, used, err := treeUsage(ctx, dir)
	if err != nil {
		return DiskLimit{}, false, fmt.Errorf("disk: measure the folder: %w", err)
	}
	size := want
	if err := makeImage(ctx, img, size, w.uid, w.gid, dir); err != nil {
		if ctx.Err() != nil {
			return DiskLimit{}, false, err
		}
		// The files do not fit in the limit (mkfs says so only by
		// failing): an image just big enough for them, which shrinks to
		// the limit on a later acquire once files were deleted.
		size = alignImage(used + used/4 + migrateSlack + imageAlign - 1)
		w.log.Warn("workspace holds more than its disk limit: its image is made just big enough",
			"user", user, "chat", chat, "used", used, "limit", want, "size", size, "error", err)
		if err := makeImage(ctx, img, size, w.uid, w.gid, dir); err != nil {
			return DiskLimit{}, false, err
		}
	}
	// The image has the files: the folder becomes its mount point. The
	// old folder goes to a trash name that prunes clear, should this
	// process stop before removing it.
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	trash := filepath.Join(w.root, user, "."+chat+".trash-"+hex.EncodeToString(suffix[:]))
	if err := os.Rename(dir, trash); err != nil {
		os.Remove(img)
		return DiskLimit{}, false, fmt.Errorf("disk: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return DiskLimit{}, false, fmt.Errorf("disk: mount point: %w", err)
	}
	if err := os.RemoveAll(trash); err != nil {
		w.log.Warn("old workspace folder not removed; the next prune removes it", "user", user, "chat", chat, "error", err)
	}
	w.log.Info("workspace moved into a disk image", "user", user, "chat", chat, "bytes", used, "size", size)
	return DiskLimit{}, true, nil
}

// unmountDisk unmounts the workspace's image after its last release in
// this process, unless another process (or an acquisition of this one
// under way) holds the workspace: then it stays mounted for them, and
// their release unmounts it.
func (w *Workspaces) unmountDisk(lock *os.File, user, chat, dir string) {
	if !exclusiveSoon(lock) {
		return
	}
	// The lock is dropped when the caller closes it, right after.
	if err := unmount(dir); err != nil {
		w.log.Warn("workspace disk not unmounted; the next acquire uses it as it is, the next start unmounts it",
			"user", user, "chat", chat, "error", err)
	}
}

// tryExclusive upgrades lock to exclusive (exclusiveSoon). When it fails,
// lock is shared again (flock's conversion is not atomic).
func tryExclusive(lock *os.File) bool {
	if exclusiveSoon(lock) {
		return true
	}
	share(lock)
	return false
}

// exclusiveWait is how long exclusiveSoon retries.
const exclusiveWait = time.Second

// exclusiveSoon takes lock exclusively unless someone holds it. A process
// this one forked a moment ago (mkfs, bwrap) holds a copy of each of its
// descriptors, and so of each of its locks, until it execs: a conflict
// is retried for exclusiveWait before it counts.
func exclusiveSoon(lock *os.File) bool {
	deadline := time.Now().Add(exclusiveWait)
	for {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return true
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) || time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// share makes lock shared again; a prune holds the exclusive one only for
// the moment it takes to move a folder away.
func share(lock *os.File) {
	for {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_SH)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// lockDir takes an exclusive flock on the folder dir, waiting while
// another process holds it, until ctx ends.
func lockDir(ctx context.Context, dir string) (func(), error) {
	f, err := openDir(dir)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// dirEmpty reports whether dir is missing or empty.
func dirEmpty(dir string) (bool, error) {
	f, err := openDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.ReadDir(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}
