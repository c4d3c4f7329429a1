package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultKeepMounted is how long serve keeps a workspace image mounted
// after its last release: a chat's turns come seconds or minutes apart.
const DefaultKeepMounted = 10 * time.Minute

// diskState returns the state of key's image, counting the caller as a
// user until putDiskState.
func (w *Workspaces) diskState(key string) *diskState {
	w.mu.Lock()
	defer w.mu.Unlock()
	ds := w.disks[key]
	if ds == nil {
		ds = &diskState{sem: make(chan struct{}, 1)}
		w.disks[key] = ds
	}
	ds.users++
	return ds
}

func (w *Workspaces) putDiskState(key string, ds *diskState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ds.users--; ds.users == 0 {
		delete(w.disks, key)
	}
}

// scheduleIdle keeps the image of (user, chat) mounted for d, then
// unmounts it unless it was acquired again. The caller holds ds.sem.
func (w *Workspaces) scheduleIdle(user, chat string, ds *diskState, d time.Duration) {
	w.mu.Lock()
	ds.users++ // the pending unmount
	w.mu.Unlock()
	w.idle.Add(1)
	it := &idleTimer{}
	it.t = time.AfterFunc(d, func() { w.expireIdle(user, chat, ds, it) })
	ds.idle = it
}

// cancelIdle stops a pending idle unmount of key's image, because it is
// acquired again. The caller holds ds.sem.
func (w *Workspaces) cancelIdle(key string, ds *diskState) {
	if ds.idle == nil {
		return
	}
	if ds.idle.t.Stop() {
		w.idle.Done()
		w.putDiskState(key, ds)
	}
	// Stop failed: expireIdle is running, waits for sem, and finds
	// ds.idle changed.
	ds.idle = nil
}

// expireIdle unmounts an image whose keep-mounted time ran out, unless it
// was acquired since (ds.idle is no longer t) or another process holds
// the workspace.
func (w *Workspaces) expireIdle(user, chat string, ds *diskState, it *idleTimer) {
	defer w.idle.Done()
	key := user + "/" + chat
	defer w.putDiskState(key, ds)
	ds.sem <- struct{}{}
	defer func() { <-ds.sem }()
	if ds.idle != it || ds.holders > 0 {
		return
	}
	ds.idle = nil
	w.unmountIdle(user, chat)
}

// unmountIdle unmounts the image of (user, chat) if no one holds the
// workspace; it reports whether the workspace is now unmounted.
func (w *Workspaces) unmountIdle(user, chat string) bool {
	dir := filepath.Join(w.root, user, chat)
	f, err := os.Open(markerPath(w.root, user, chat))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No marker, so no holder (each locks it; a prune never removes
		// the marker of a workspace in use): the workspace was deleted
		// from under its mount (an rm -rf of the data root, which stops
		// at the busy mount point). The mount goes; a deleted image's
		// loop device and blocks go with it.
		if err := unmount(dir); err != nil {
			w.log.Warn("workspace disk not unmounted", "user", user, "chat", chat, "error", err)
		}
	case err != nil:
		return false
	default:
		defer f.Close()
		if !exclusiveSoon(f) {
			return false // held by another process: its release unmounts it
		}
		w.unmountDisk(f, user, chat, dir)
	}
	dev, err := mountedDevice(dir)
	return err == nil && dev == ""
}

// Close unmounts the images this process keeps mounted after their last
// release (KeepMounted) and waits for unmounts under way; acquisitions
// still held keep theirs until released. It is idempotent; the
// Workspaces stays usable (a later release keeps its image again).
func (w *Workspaces) Close(ctx context.Context) error {
	w.mu.Lock()
	states := make(map[string]*diskState, len(w.disks))
	for k, ds := range w.disks {
		states[k] = ds
	}
	w.mu.Unlock()
	for key, ds := range states {
		select {
		case ds.sem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if ds.idle != nil && ds.idle.t.Stop() {
			ds.idle = nil
			user, chat, _ := strings.Cut(key, "/")
			w.unmountIdle(user, chat)
			w.idle.Done()
			w.putDiskState(key, ds)
		}
		<-ds.sem
	}
	done := make(chan struct{})
	go func() { w.idle.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// adoptIdle takes over an image another process left mounted and no one
// holds: unmounted now when idle for KeepMounted already, else kept until
// then, like one of this process's own. It reports whether it is still
// mounted.
func (w *Workspaces) adoptIdle(user, chat string, lastUse time.Time) bool {
	idle := time.Since(lastUse)
	if w.keep <= 0 || idle >= w.keep {
		return !w.unmountIdle(user, chat)
	}
	key := user + "/" + chat
	ds := w.diskState(key)
	defer w.putDiskState(key, ds)
	ds.sem <- struct{}{}
	defer func() { <-ds.sem }()
	if ds.holders == 0 && ds.idle == nil {
		ds.limit = DiskLimit{Mode: DiskLoop}
		w.scheduleIdle(user, chat, ds, w.keep-idle)
	}
	return true
}
