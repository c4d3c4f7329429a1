package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/units"
	"golang.org/x/sys/unix"
)

// Disk limits (sandbox.max_disk).
//
// On a plain Docker host (overlay2 or anything else on ext4, no XFS
// project quotas) the one limit that holds for every write, from any
// process, through any mount (Docker bind mounts, bubblewrap binds), is a
// filesystem of its own: each limited workspace is a sparse ext4 image,
// {dataRoot}/workspaces/{user}/.{chat}.disk, the size of its limit,
// loop-mounted at the workspace folder while requests use it (and for
// WorkspacesOptions.KeepMounted after the last one, so a chat's next turn
// reuses the mount), then unmounted with its loop device detached. An
// agent that writes past the limit gets ENOSPC from the kernel, whatever
// it runs. The image holds only what is written (mounted with discard,
// deleting files gives the space back to the host), so a 10 GiB limit
// costs a few MiB on the host until it is used.
//
// A project quota (ext4 prjquota, XFS pquota) would avoid the images, but
// needs a host filesystem mounted with it, which a plain Docker host does
// not have; a size-limited Docker volume is itself a loop device or tmpfs
// (memory); a watcher that measures can only react after the fact. So:
// images where the server can mount (DiskLoop: root with loop devices and
// e2fsprogs), and measurement elsewhere (DiskWatch: a developer's machine
// without root, and workspaces on a PersistentVolumeClaim that sandbox
// pods on other nodes mount, where no mount of the server's reaches
// them). Measured, the limit is still kept: once a workspace holds more
// than its limit, every process that may write to it is stopped (the
// sandbox is removed) and the files its sandbox wrote are deleted, largest
// first, until it is back within the limit (WatchDisk). What a sandbox
// can write between two measures (every 2 s or more) is the overshoot it
// may briefly hold.

// DiskMode is how a Workspaces enforces disk limits.
type DiskMode string

// Disk modes.
const (
	// DiskNone: no limits (NewWorkspaces' default); workspaces are plain
	// folders. A workspace that is an image cannot be acquired.
	DiskNone DiskMode = ""
	// DiskLoop: a limited workspace is an ext4 image of its limit's size,
	// loop-mounted while in use: writes past the limit fail with ENOSPC.
	DiskLoop DiskMode = "loop"
	// DiskWatch: workspaces stay plain folders; WatchDisk measures them
	// while a sandbox may write to them, and one that grew past its limit
	// has its sandbox stopped and what the sandbox wrote past the limit
	// deleted.
	DiskWatch DiskMode = "watch"
)

// DiskLimit is the disk limit a workspace was acquired with.
type DiskLimit struct {
	// Bytes is the limit; 0 means none.
	Bytes int64 `json:"bytes"`
	// Mode is DiskLoop when the limit is a filesystem of that size,
	// DiskWatch when it is only measured.
	Mode DiskMode `json:"mode"`
}

// hint ends a disk-full error message with the limit, when there is one.
func (d DiskLimit) hint() string {
	if d.Bytes <= 0 {
		return ""
	}
	return fmt.Sprintf(" (its limit, sandbox.max_disk, is %s)", units.FormatBytes(d.Bytes))
}

// Disk returns the limit the workspace was acquired with (zero for a
// workspace opened with OpenWorkspace).
func (w *Workspace) Disk() DiskLimit { return w.disk }

// DiskFull says a workspace reached its disk limit.
type DiskFull struct {
	// Used is what the workspace holds, Limit its limit, in bytes.
	Used, Limit int64
	// Enforced: the workspace is a filesystem of that size, so writes
	// inside the sandbox failed with ENOSPC. Otherwise (DiskWatch) the
	// workspace grew past its limit: its sandbox was stopped (HaltErr
	// says why not, when it could not be) and the files it wrote were
	// deleted, largest first, until it held no more than the limit
	// (Removed, relative to the workspace; After is what it holds then).
	Enforced bool
	HaltErr  error
	Removed  []string
	After    int64
}

// NoticeCode is the code of the notice a turn sends when its workspace
// is full.
const NoticeCode = "disk_full"

// Message says what happened and what to do, for a notice to the user.
func (d DiskFull) Message() string {
	if d.Enforced {
		return fmt.Sprintf("the workspace is full: %s used of its %s limit (sandbox.max_disk); writes in the sandbox fail with \"No space left on device\" until files are deleted or the limit is raised",
			units.FormatBytes(d.Used), units.FormatBytes(d.Limit))
	}
	msg := fmt.Sprintf("the workspace grew past its limit: %s used of %s (sandbox.max_disk), measured (this server does not mount a limited filesystem for it); the sandbox was stopped",
		units.FormatBytes(d.Used), units.FormatBytes(d.Limit))
	if d.HaltErr != nil {
		msg += " (not all of it: " + d.HaltErr.Error() + ")"
	}
	switch n := len(d.Removed); {
	case n > 0:
		names := d.Removed[:min(n, 10)]
		msg += fmt.Sprintf(" and the %d files it wrote past the limit were deleted, largest first, leaving %s: %s", n, units.FormatBytes(d.After), strings.Join(names, ", "))
		if n > len(names) {
			msg += ", …"
		}
	case d.After > d.Limit:
		msg += fmt.Sprintf("; it still holds %s, files older than the sandbox: delete files or raise the limit", units.FormatBytes(d.After))
	}
	return msg
}

// Watch intervals: a statfs is cheap; a walk of a large workspace is not,
// so the watcher waits at least watchWalkFactor times its last walk.
const (
	watchLoopInterval = time.Second
	watchWalkInterval = 2 * time.Second
	watchWalkFactor   = 5
)

// fullSlack is the free space under which a limited filesystem counts as
// full: ext4 keeps a reserve for its own metadata, so the space left when
// a write fails with ENOSPC is not zero.
func fullSlack(size int64) int64 { return max(1<<20, size/1000) }

// WatchDisk watches the workspace's disk use while a sandbox may write to
// it (a turn, a terminal, a kept chat between turns), until ctx ends or
// stop is called; stop returns after a last check, so a workspace filled
// just before is reported too. onFull is called at most once, from the
// watcher's goroutine (or stop's), when the workspace is full: for
// DiskLoop when its filesystem has (nearly) no space left (the kernel
// refused the writes); for DiskWatch when it holds more than its limit
// and more than when the watch started (a sandbox that starts over the
// limit may delete files, not add). For DiskWatch the limit is then kept
// before onFull is called: halt stops every process that may write to the
// workspace (it removes the sandbox; nil: nothing to stop), and the files
// changed since the workspace was opened are deleted, the product's own
// .agentbox folder last, largest first, until the workspace holds no more
// than it may. A DiskLoop workspace that is full when the watch starts is
// reported by stop only, if it still is then. A workspace without a limit
// is not watched.
func (w *Workspace) WatchDisk(ctx context.Context, halt func(context.Context) error, onFull func(DiskFull)) (stop func()) {
	if w.disk.Bytes <= 0 || w.disk.Mode == DiskNone {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	fired := false
	var floor int64
	startFull := false
	switch w.disk.Mode {
	case DiskWatch:
		floor = w.disk.Bytes
		if used, err := w.usage(ctx); err == nil && used > floor {
			floor = used
		}
	case DiskLoop:
		// Full from the start (the last turn filled it): said at the end
		// if it still is, not before the agent had a chance to clean up.
		_, startFull = w.diskFull(ctx, 0)
	}
	report := func(ctx context.Context, full DiskFull) {
		fired = true
		if !full.Enforced {
			w.keepLimit(ctx, &full, halt, floor)
		}
		onFull(full)
	}
	check := func() {
		if fired || startFull {
			return
		}
		if full, ok := w.diskFull(ctx, floor); ok {
			report(ctx, full)
		}
	}
	go func() {
		defer close(done)
		interval := watchLoopInterval
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval):
			}
			start := time.Now()
			check()
			if w.disk.Mode == DiskWatch {
				interval = max(watchWalkInterval, watchWalkFactor*time.Since(start))
			}
		}
	}()
	return func() {
		cancel()
		<-done
		// The last check runs after the turn ended: bounded on its own.
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer ccancel()
		if !fired {
			if full, ok := w.diskFull(cctx, floor); ok {
				report(cctx, full)
			}
		}
	}
}

// keepLimit brings a measured workspace that grew past its limit back
// within it (target bytes: the limit, or what it held when the watch
// started if that was more): halt stops its writers, then the files
// changed since the workspace was opened go, largest first (the
// product's .agentbox folder last, empty folders after the files), until
// it holds no more than target. What it removed and holds then go into
// full. It works through the workspace's root handle, so nothing outside
// the workspace is touched whatever the agent left in it.
func (w *Workspace) keepLimit(ctx context.Context, full *DiskFull, halt func(context.Context) error, target int64) {
	// Bounded on its own: the watch's ctx may be ending with the turn.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if halt != nil {
		full.HaltErr = halt(ctx)
	}
	full.After = full.Used
	for pass := 0; pass < 3; pass++ {
		used, cands, err := w.changedSince(ctx, w.opened)
		if err != nil {
			return
		}
		full.After = used
		if used <= target || len(cands) == 0 {
			return
		}
		for _, c := range cands {
			if used <= target {
				break
			}
			if err := w.root.Remove(c.rel); err == nil {
				full.Removed = append(full.Removed, c.rel)
				used -= c.bytes
			}
		}
	}
	if used, _, err := treeUsage(ctx, w.dir); err == nil {
		full.After = used
	}
}

// changed is an entry changed since some time, a candidate for keepLimit.
type changed struct {
	rel   string
	bytes int64
	tier  int // 0 the agent's files, 1 its folders, 2 and 3 the same in .agentbox
	depth int
}

// changedSince measures the workspace and returns its entries changed
// (by their change time, which no process can set) at or after since, in
// the order keepLimit removes them.
func (w *Workspace) changedSince(ctx context.Context, since time.Time) (int64, []changed, error) {
	var used int64
	if st, err := os.Lstat(w.dir); err == nil {
		used = diskBytes(st)
	}
	var out []changed
	err := walkTree(ctx, w.dir, func(p string, st fs.FileInfo) {
		used += diskBytes(st)
		if changeTime(st).Before(since) {
			return
		}
		rel, err := filepath.Rel(w.dir, p)
		if err != nil {
			return
		}
		c := changed{rel: rel, bytes: diskBytes(st), depth: strings.Count(rel, string(filepath.Separator))}
		if st.IsDir() {
			c.tier = 1
		}
		if rel == ".agentbox" || strings.HasPrefix(rel, ".agentbox"+string(filepath.Separator)) {
			c.tier += 2
		}
		out = append(out, c)
	})
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch {
		case a.tier != b.tier:
			return a.tier < b.tier
		case a.tier%2 == 1:
			return a.depth > b.depth // folders deepest first: each goes once empty
		}
		return a.bytes > b.bytes
	})
	return used, out, err
}

// diskFull checks the workspace once.
func (w *Workspace) diskFull(ctx context.Context, floor int64) (DiskFull, bool) {
	switch w.disk.Mode {
	case DiskLoop:
		sp, err := fsSpace(w.dir)
		if err != nil || sp.avail >= fullSlack(sp.size) {
			return DiskFull{}, false
		}
		// ext4 counts the blocks of a deleted file free only once its
		// journal commits (every 5 s): commit, then look again.
		if err := syncFS(w.dir); err == nil {
			if sp, err = fsSpace(w.dir); err != nil || sp.avail >= fullSlack(sp.size) {
				return DiskFull{}, false
			}
		}
		return DiskFull{Used: sp.used, Limit: w.disk.Bytes, Enforced: true}, true
	case DiskWatch:
		used, err := w.usage(ctx)
		if err != nil || used <= floor {
			return DiskFull{}, false
		}
		return DiskFull{Used: used, Limit: w.disk.Bytes}, true
	}
	return DiskFull{}, false
}

// space is a filesystem's size and use, in bytes.
type space struct {
	size, used, avail int64
}

// fsSpace reports the filesystem holding dir.
func fsSpace(dir string) (space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return space{}, err
	}
	bs := int64(st.Bsize)
	return space{size: int64(st.Blocks) * bs, used: int64(st.Blocks-st.Bfree) * bs, avail: int64(st.Bavail) * bs}, nil
}

// Room returns how many bytes more the workspace may take under its disk
// limit, and whether it has one: for DiskLoop the free space of its
// filesystem, for DiskWatch its limit less what it holds (a walk). A
// caller that writes for a user (an upload) bounds what it writes by it,
// since in DiskWatch mode nothing else does.
func (w *Workspace) Room(ctx context.Context) (room int64, limited bool, err error) {
	switch {
	case w.disk.Bytes <= 0:
		return 0, false, nil
	case w.disk.Mode == DiskLoop:
		sp, err := fsSpace(w.dir)
		if err != nil {
			return 0, true, fmt.Errorf("workspace space: %w", err)
		}
		return max(0, sp.avail), true, nil
	case w.disk.Mode == DiskWatch:
		used, err := w.usage(ctx)
		if err != nil {
			return 0, true, fmt.Errorf("workspace space: %w", err)
		}
		return max(0, w.disk.Bytes-used), true, nil
	}
	return 0, false, nil
}

// usage is what the workspace takes on disk, measured by walking it.
func (w *Workspace) usage(ctx context.Context) (int64, error) {
	_, disk, err := treeUsage(ctx, w.dir)
	return disk, err
}

// DetectDiskMode says how workspaces under dataRoot can be limited on
// this host: DiskLoop when this process can format, loop-mount and
// unmount an ext4 image there (it tries, with a small one, once per boot
// of the host: a data root remembers the boot it passed in, so that a
// command that answers one turn does not pay the probe's few tens of
// milliseconds every time), else DiskWatch with the reason.
func DetectDiskMode(ctx context.Context, dataRoot string) (DiskMode, string) {
	if os.Geteuid() != 0 {
		return DiskWatch, "not running as root, so workspaces cannot be loop-mounted"
	}
	abs, err := filepath.Abs(dataRoot)
	if err != nil {
		return DiskWatch, err.Error()
	}
	if err := probeLoop(ctx, filepath.Join(abs, "workspaces")); err != nil {
		return DiskWatch, err.Error()
	}
	return DiskLoop, ""
}
