package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
)

const testDisk = 40 << 20

// loopWorkspaces is a Workspaces in DiskLoop mode over a fresh data root;
// the test fails if a loop device is still attached to one of its images
// when it ends.
func loopWorkspaces(t testing.TB) *Workspaces {
	t.Helper()
	testenv.LoopDisks(t)
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop})
	must(t, err)
	t.Cleanup(func() {
		if l := waitLoopsGone(w.Root()); len(l) > 0 {
			t.Errorf("loop devices left attached: %v", l)
			_, _ = w.Recover(context.Background())
		}
	})
	return w
}

// waitLoopsGone waits a moment for the kernel to detach the loop devices
// under root (it may do so after an unmount returned) and returns those
// still attached.
func waitLoopsGone(root string) []string {
	deadline := time.Now().Add(3 * time.Second)
	for {
		l := loopsUnder(root)
		if len(l) == 0 || time.Now().After(deadline) {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// loopsUnder lists the loop devices backed by files under root.
func loopsUnder(root string) []string {
	var out []string
	for _, l := range loopDevices() {
		if strings.HasPrefix(l.backing, root+"/") {
			out = append(out, l.dev+" "+l.backing)
		}
	}
	return out
}

func isMounted(t testing.TB, dir string) bool {
	t.Helper()
	dev, err := mountedDevice(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return dev != ""
}

func fsSize(t testing.TB, dir string) int64 {
	t.Helper()
	sp, err := fsSpace(dir)
	must(t, err)
	return sp.size
}

// TestDiskLimitEnforced: a workspace acquired with a limit is an ext4
// image of that size mounted at its folder: a write past it fails with
// ENOSPC (ErrDiskFull through the Workspace), WatchDisk reports it, the
// host file never grows beyond the limit, and release unmounts it and
// detaches the loop device. The files are there on the next acquire.
func TestDiskLimitEnforced(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	defer release()
	if ws.Disk() != (DiskLimit{Bytes: testDisk, Mode: DiskLoop}) {
		t.Fatalf("Disk() = %+v", ws.Disk())
	}
	if !isMounted(t, ws.Dir()) {
		t.Fatal("workspace folder is not a mount point")
	}
	if list, _ := ws.ListDir(ctx, "."); len(list) != 0 {
		t.Errorf("a new workspace lists %v (lost+found must go)", list)
	}
	var fired []DiskFull
	var mu sync.Mutex
	stop := ws.WatchDisk(ctx, nil, func(f DiskFull) { mu.Lock(); fired = append(fired, f); mu.Unlock() })
	must(t, ws.WriteFile(ctx, "keep.txt", []byte("kept"), 0))
	err = ws.WriteFile(ctx, "big", make([]byte, testDisk), 0)
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "sandbox.max_disk") {
		t.Errorf("write past the limit = %v, want ErrDiskFull", err)
	}
	// The host side of a sandbox: plain writes until ENOSPC.
	f, err := os.Create(filepath.Join(ws.Dir(), "fill"))
	must(t, err)
	var werr error
	for range 2 * testDisk / (1 << 20) {
		if _, werr = f.Write(make([]byte, 1<<20)); werr != nil {
			break
		}
	}
	f.Close()
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Errorf("filling the workspace: %v, want ENOSPC", werr)
	}
	stop()
	mu.Lock()
	if len(fired) != 1 || !fired[0].Enforced || fired[0].Limit != testDisk || !strings.Contains(fired[0].Message(), "No space left on device") {
		t.Errorf("WatchDisk reported %+v", fired)
	}
	mu.Unlock()
	img := imagePath(w.Root(), "u", "c")
	st, err := os.Stat(img)
	must(t, err)
	if st.Size() != testDisk || diskBytes(st) > testDisk {
		t.Errorf("image is %d bytes, %d on disk; limit %d", st.Size(), diskBytes(st), testDisk)
	}
	// A turn that starts full is told at its end if it still is, not
	// before; one that cleans up is not told.
	var again []DiskFull
	stop = ws.WatchDisk(ctx, nil, func(f DiskFull) { mu.Lock(); again = append(again, f); mu.Unlock() })
	time.Sleep(watchLoopInterval + 300*time.Millisecond)
	mu.Lock()
	if len(again) != 0 {
		t.Errorf("a turn starting full was told before its end: %+v", again)
	}
	mu.Unlock()
	stop()
	if len(again) != 1 {
		t.Errorf("a turn ending full was told %d times", len(again))
	}
	again = nil
	stop = ws.WatchDisk(ctx, nil, func(f DiskFull) { mu.Lock(); again = append(again, f); mu.Unlock() })
	must(t, ws.RemoveAll(ctx, "fill"))
	must(t, ws.RemoveAll(ctx, "big"))
	stop()
	if len(again) != 0 {
		t.Errorf("a turn that deleted files was told the workspace is full: %+v", again)
	}
	release()
	if isMounted(t, ws.Dir()) {
		t.Error("still mounted after release")
	}
	if l := waitLoopsGone(w.Root()); len(l) > 0 {
		t.Errorf("loop devices after release: %v", l)
	}
	ws2, release2, err := w.Acquire(ctx, "u", "c")
	must(t, err)
	defer release2()
	if b, err := ws2.ReadFile(ctx, "keep.txt", 0); err != nil || string(b) != "kept" {
		t.Errorf("after reacquire: %q, %v", b, err)
	}
	if ws2.Disk().Bytes != testDisk {
		t.Errorf("reacquire without a limit: %+v, want the image's", ws2.Disk())
	}
}

// TestDiskResize: a changed limit resizes the image on the next acquire;
// a smaller one that the files do not fit keeps the size that holds them.
func TestDiskResize(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	acquire := func(limit int64) (*Workspace, func()) {
		ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: limit})
		must(t, err)
		return ws, release
	}
	ws, release := acquire(testDisk)
	must(t, ws.WriteFile(ctx, "data", bytes.Repeat([]byte("x"), 28<<20), 0))
	small := fsSize(t, ws.Dir())
	release()

	ws, release = acquire(2 * testDisk)
	if ws.Disk().Bytes != 2*testDisk || fsSize(t, ws.Dir()) <= small {
		t.Errorf("grown: %+v, filesystem %d (was %d)", ws.Disk(), fsSize(t, ws.Dir()), small)
	}
	if b, err := ws.ReadFile(ctx, "data", 0); err != nil || len(b) != 28<<20 {
		t.Errorf("data after growing: %d, %v", len(b), err)
	}
	release()

	ws, release = acquire(testDisk)
	if ws.Disk().Bytes != testDisk {
		t.Errorf("shrunk: %+v", ws.Disk())
	}
	release()

	// 28 MiB of files do not fit in MinDisk's filesystem: it stays.
	ws, release = acquire(MinDisk)
	if ws.Disk().Bytes != testDisk {
		t.Errorf("shrink that cannot fit: %+v, want it kept at %d", ws.Disk(), testDisk)
	}
	if b, err := ws.ReadFile(ctx, "data", 0); err != nil || len(b) != 28<<20 {
		t.Errorf("data after a failed shrink: %d, %v", len(b), err)
	}
	release()
}

// TestDiskMigration: a workspace made before limits (a plain folder)
// moves into an image on its first limited acquire, with its files,
// modes, links and FIFOs; the old folder is gone.
func TestDiskMigration(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	plain, err := NewWorkspaces(filepath.Dir(w.Root()), -1, -1)
	must(t, err)
	ws, release, err := plain.Acquire(ctx, "u", "old")
	must(t, err)
	must(t, ws.WriteFile(ctx, "src/main.sh", []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(t, os.Symlink("src/main.sh", filepath.Join(ws.Dir(), "run")))
	must(t, syscall.Mkfifo(filepath.Join(ws.Dir(), "pipe"), 0o600))
	release()

	ws, release, err = w.AcquireWith(ctx, "u", "old", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	defer release()
	if !isMounted(t, ws.Dir()) || ws.Disk().Bytes != testDisk {
		t.Fatalf("not migrated: mounted %v, %+v", isMounted(t, ws.Dir()), ws.Disk())
	}
	st, err := os.Stat(filepath.Join(ws.Dir(), "src/main.sh"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("main.sh: %v, %v", st, err)
	}
	if b, err := ws.ReadFile(ctx, "run", 0); err != nil || !strings.Contains(string(b), "echo hi") {
		t.Errorf("symlink: %q, %v", b, err)
	}
	if st, err := ws.Lstat(ctx, "pipe"); err != nil || st.Mode&fs.ModeNamedPipe == 0 {
		t.Errorf("fifo: %+v, %v", st, err)
	}
	ents, _ := os.ReadDir(filepath.Join(w.Root(), "u"))
	for _, e := range ents {
		if strings.Contains(e.Name(), "trash") || strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// TestDiskMigrationOverLimit: a folder holding more than its new limit
// gets an image just big enough, which shrinks to the limit on a later
// acquire once files were deleted.
func TestDiskMigrationOverLimit(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	plain, err := NewWorkspaces(filepath.Dir(w.Root()), -1, -1)
	must(t, err)
	ws, release, err := plain.Acquire(ctx, "u", "big")
	must(t, err)
	must(t, ws.WriteFile(ctx, "big", bytes.Repeat([]byte("y"), testDisk+(8<<20)), 0))
	release()

	ws, release, err = w.AcquireWith(ctx, "u", "big", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	if ws.Disk().Bytes <= testDisk {
		t.Errorf("image of %d bytes for %d of files", ws.Disk().Bytes, testDisk+(8<<20))
	}
	if b, err := ws.ReadFile(ctx, "big", 64<<20); err != nil || len(b) != testDisk+(8<<20) {
		t.Errorf("big after migration: %d, %v", len(b), err)
	}
	must(t, ws.RemoveAll(ctx, "big"))
	release()
	ws, release, err = w.AcquireWith(ctx, "u", "big", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	if ws.Disk().Bytes != testDisk {
		t.Errorf("after deleting: %+v, want the limit", ws.Disk())
	}
	release()
}

// TestDiskConcurrent: turns of one chat share one mount (the last release
// unmounts); turns of different chats each get their own, at once.
func TestDiskConcurrent(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	ws1, r1, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	ws2, r2, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: 2 * testDisk})
	must(t, err)
	if ws2.Disk().Bytes != testDisk {
		t.Errorf("second acquire while mounted: %+v, want the mounted size", ws2.Disk())
	}
	must(t, ws1.WriteFile(ctx, "a", []byte("1"), 0))
	r1()
	if !isMounted(t, ws2.Dir()) {
		t.Fatal("unmounted under a live acquisition")
	}
	if b, err := ws2.ReadFile(ctx, "a", 0); err != nil || string(b) != "1" {
		t.Errorf("shared mount: %q, %v", b, err)
	}
	r2()
	if isMounted(t, ws2.Dir()) {
		t.Error("mounted after the last release")
	}

	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				chat := fmt.Sprintf("c%d", i)
				ws, release, err := w.AcquireWith(ctx, "u", chat, AcquireOptions{MaxDisk: testDisk})
				if err != nil {
					errs <- err
					return
				}
				if err := ws.WriteFile(ctx, fmt.Sprintf("f%d", j), []byte(chat), 0); err != nil {
					errs <- err
				}
				release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDiskPruneAndRecover: what a crashed server leaves (an image still
// mounted, a half-made image, a probe) is cleaned at start by Recover, a
// live process's mount is left alone, and a prune removes an image
// workspace with its folder, unmounting a leftover first.
func TestDiskPruneAndRecover(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	for _, c := range []string{"crashed", "stale", "live"} {
		_, release, err := w.AcquireWith(ctx, "u", c, AcquireOptions{MaxDisk: testDisk})
		must(t, err)
		release()
	}
	// A crash: the images mounted with no one holding them.
	for _, c := range []string{"crashed", "stale"} {
		must(t, mountImage(imagePath(w.Root(), "u", c), filepath.Join(w.Root(), "u", c)))
	}
	_, releaseLive, err := w.AcquireWith(ctx, "u", "live", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	defer releaseLive()
	must(t, os.WriteFile(imagePath(w.Root(), "u", "x")+".tmp-abc", nil, 0o600))
	// The image a live process is making for a chat it holds.
	liveTmp := imagePath(w.Root(), "u", "live") + ".tmp-def"
	must(t, os.WriteFile(liveTmp, nil, 0o600))

	// Another process (a fresh Workspaces) starting over the same root.
	w2, err := NewWorkspacesWith(filepath.Dir(w.Root()), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop})
	must(t, err)
	must(t, w2.SetLastUse("u", "stale", time.Now().Add(-30*24*time.Hour)))
	rep, err := w2.Prune(ctx, PruneOptions{OlderThan: 7 * 24 * time.Hour})
	must(t, err)
	if len(rep.Removed) != 1 || rep.Removed[0].Chat != "stale" || rep.Removed[0].Bytes == 0 {
		t.Errorf("prune removed %+v", rep.Removed)
	}
	if _, err := os.Stat(imagePath(w.Root(), "u", "stale")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale image kept: %v", err)
	}
	rec, err := w2.Recover(ctx)
	must(t, err)
	if strings.Join(rec.Unmounted, ",") != "u/crashed" || len(rec.Removed) != 1 {
		t.Errorf("recover: %+v", rec)
	}
	if _, err := os.Stat(liveTmp); err != nil {
		t.Errorf("recover removed the image a live process is making: %v", err)
	}
	if isMounted(t, filepath.Join(w.Root(), "u", "crashed")) {
		t.Error("crashed workspace still mounted")
	}
	if !isMounted(t, filepath.Join(w.Root(), "u", "live")) {
		t.Error("recover unmounted a live workspace")
	}
}

// TestDiskRecoverDeleted: an rm -rf of the data root under a mounted
// workspace removes its marker and image but stops at the mount point;
// the next start unmounts it, which lets the loop device and the deleted
// image's blocks go, and the folder can then be removed. DiskMounts counts
// the mount and the loop device until then.
func TestDiskRecoverDeleted(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	_, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	release()
	if m := w.DiskMounts(); m != (DiskMounts{}) {
		t.Fatalf("after release: %+v, want nothing mounted", m)
	}
	dir := filepath.Join(w.Root(), "u", "c")
	// A crash: the image left mounted with no one holding it.
	must(t, mountImage(imagePath(w.Root(), "u", "c"), dir))
	if m := w.DiskMounts(); m != (DiskMounts{Mounted: 1, LoopDevices: 1}) {
		t.Fatalf("left mounted: %+v", m)
	}
	if err := os.RemoveAll(w.Root()); err == nil || !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("rm -rf of a mounted workspace: %v, want EBUSY", err)
	}
	if _, err := os.Stat(markerPath(w.Root(), "u", "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("marker: %v, want it removed", err)
	}
	w2, err := NewWorkspacesWith(filepath.Dir(w.Root()), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskLoop})
	must(t, err)
	rep, err := w2.Recover(ctx)
	must(t, err)
	if strings.Join(rep.Unmounted, ",") != "u/c" || isMounted(t, dir) {
		t.Fatalf("recover: %+v, mounted %v", rep, isMounted(t, dir))
	}
	if l := waitLoopsGone(w.Root()); len(l) > 0 {
		t.Fatalf("loop devices left: %v", l)
	}
	must(t, os.RemoveAll(w.Root()))
}

// TestDiskList: List gives each workspace's size and limit; Usage the data
// root's total, counting images once.
func TestDiskList(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	ws, release, err := w.AcquireWith(ctx, "u", "img", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	must(t, ws.WriteFile(ctx, "f", bytes.Repeat([]byte("z"), 5<<20), 0))
	plain, err := NewWorkspaces(filepath.Dir(w.Root()), -1, -1)
	must(t, err)
	pws, prelease, err := plain.Acquire(ctx, "u", "plain")
	must(t, err)
	must(t, pws.WriteFile(ctx, "f", bytes.Repeat([]byte("z"), 1<<20), 0))
	prelease()

	list, err := w.List(ctx)
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("list = %+v", list)
	}
	img, pl := list[0], list[1]
	if img.Chat != "img" || !img.InUse || !img.Mounted || img.Limit != testDisk || img.Used < 5<<20 || img.Bytes < 5<<20 || img.Bytes > testDisk {
		t.Errorf("image workspace: %+v", img)
	}
	if pl.Chat != "plain" || pl.InUse || pl.Limit != 0 || pl.Bytes < 1<<20 {
		t.Errorf("plain workspace: %+v", pl)
	}
	u, err := w.Usage(ctx)
	must(t, err)
	if u.Workspaces != 2 || u.Mounted != 1 || u.LoopDevices != 1 || u.WorkspaceBytes != img.Bytes+pl.Bytes || u.Bytes < u.WorkspaceBytes || u.Bytes > u.WorkspaceBytes+(1<<20) || u.FSSize == 0 {
		t.Errorf("usage: %+v", u)
	}
	release()
}

// TestDiskWatchMode: without a filesystem of its own the limit is
// measured and still kept: a workspace that grew past its limit is
// reported once, after its writers were stopped (halt) and the files
// written since it was opened deleted, largest first, until it is within
// its limit; files from before stay. One that started over its limit and
// did not grow is not reported.
func TestDiskWatchMode(t *testing.T) {
	t.Parallel()
	w, err := NewWorkspacesWith(t.TempDir(), WorkspacesOptions{UID: -1, GID: -1, Disk: DiskWatch})
	must(t, err)
	ctx := context.Background()
	const limit = 1 << 20
	before, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: limit})
	must(t, err)
	must(t, before.WriteFile(ctx, "keep.txt", make([]byte, 512<<10), 0))
	release()
	ws, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: limit})
	must(t, err)
	defer release()
	if ws.Disk() != (DiskLimit{Bytes: limit, Mode: DiskWatch}) {
		t.Fatalf("Disk() = %+v", ws.Disk())
	}
	got := make(chan DiskFull, 4)
	var halts atomic.Int32
	halt := func(context.Context) error { halts.Add(1); return nil }
	stop := ws.WatchDisk(ctx, halt, func(f DiskFull) { got <- f })
	must(t, ws.WriteFile(ctx, "small", make([]byte, 256<<10), 0))
	must(t, ws.WriteFile(ctx, "big", make([]byte, 2<<20), 0))
	select {
	case f := <-got:
		if f.Enforced || f.Used <= limit || f.After > limit || !slices.Equal(f.Removed, []string{"big"}) || halts.Load() != 1 ||
			!strings.Contains(f.Message(), "stopped") || !strings.Contains(f.Message(), "big") {
			t.Errorf("reported %+v after %d halts: %s", f, halts.Load(), f.Message())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not reported")
	}
	stop()
	if len(got) != 0 {
		t.Errorf("reported twice")
	}
	for _, name := range []string{"keep.txt", "small"} {
		if _, err := ws.Stat(ctx, name); err != nil {
			t.Errorf("%s: %v, want it kept", name, err)
		}
	}
	// Over the limit from the start, and not growing: no report.
	must(t, ws.WriteFile(ctx, "over", make([]byte, limit), 0))
	stop = ws.WatchDisk(ctx, halt, func(f DiskFull) { got <- f })
	must(t, ws.RemoveAll(ctx, "small"))
	stop()
	if len(got) != 0 || halts.Load() != 1 {
		t.Errorf("reported a workspace that shrank: %d reports, %d halts", len(got), halts.Load())
	}
}

// TestDiskImageNeedsLoopMode: a process that cannot mount refuses a
// workspace that is an image, saying why, rather than showing an empty
// folder.
func TestDiskImageNeedsLoopMode(t *testing.T) {
	t.Parallel()
	w := loopWorkspaces(t)
	ctx := context.Background()
	_, release, err := w.AcquireWith(ctx, "u", "c", AcquireOptions{MaxDisk: testDisk})
	must(t, err)
	release()
	for _, mode := range []DiskMode{DiskNone, DiskWatch} {
		o, err := NewWorkspacesWith(filepath.Dir(w.Root()), WorkspacesOptions{UID: -1, GID: -1, Disk: mode})
		must(t, err)
		if _, _, err := o.Acquire(ctx, "u", "c"); err == nil || !strings.Contains(err.Error(), "disk image") {
			t.Errorf("mode %q: acquire = %v", mode, err)
		}
	}
}

func TestDetectDiskMode(t *testing.T) {
	t.Parallel()
	testenv.LoopDisks(t)
	root := t.TempDir()
	mode, why := DetectDiskMode(context.Background(), root)
	if mode != DiskLoop {
		t.Fatalf("mode %q: %s", mode, why)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "workspaces")); len(ents) != 0 {
		t.Errorf("probe left %v", ents)
	}
	// A data root that stays remembers the boot the probe passed in: the
	// next process does not probe again; a marker of another boot probes.
	must(t, os.MkdirAll(filepath.Join(root, "workspaces"), 0o700))
	if mode, why := DetectDiskMode(context.Background(), root); mode != DiskLoop {
		t.Fatalf("second probe: mode %q: %s", mode, why)
	}
	b, err := os.ReadFile(filepath.Join(root, loopProbeMarker))
	if err != nil || string(b) != bootID() || bootID() == "" {
		t.Fatalf("marker %q, %v; boot id %q", b, err, bootID())
	}
	must(t, os.WriteFile(filepath.Join(root, loopProbeMarker), []byte("another boot"), 0o600))
	if mode, _ := DetectDiskMode(context.Background(), root); mode != DiskLoop {
		t.Fatalf("after another boot: mode %q", mode)
	}
	if b, _ := os.ReadFile(filepath.Join(root, loopProbeMarker)); string(b) != bootID() {
		t.Errorf("marker of another boot not replaced: %q", b)
	}
}
