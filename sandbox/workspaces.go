package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/flock"
)

// Workspaces manages the chat workspaces of a data root: the folder
// {dataRoot}/workspaces/{user}/{chat}/ of every chat, its last-use time and
// whether a live request uses it.
//
// Last use and "in use" live outside the workspace folder, in a marker file
// {dataRoot}/workspaces/{user}/.{chat}.lastuse (its modification time is the
// last use; ids never start with '.', so markers cannot collide with chat
// folders, and the agent, which only sees its chat folder, cannot fake them).
// A workspace in use holds a shared flock on its marker; Prune takes an
// exclusive one before it removes anything, so it never removes a workspace
// that a request of this or another process (`agentbox workspaces prune`
// next to a running server) has acquired, including one acquired while the
// prune runs.
//
// With a disk mode (WorkspacesOptions.Disk), a workspace acquired with a
// limit (AcquireOptions.MaxDisk) is limited: see DiskMode. Its image lives
// next to the marker, {dataRoot}/workspaces/{user}/.{chat}.disk, outside
// the agent's reach, and is mounted only while the workspace is acquired.
//
// Nothing under the data root is readable by other users of the host:
// the folders above the workspaces ({dataRoot}/workspaces and each user's,
// and the data root when made here) can be listed by their owner only
// and passed through only by the sandbox user's group (with a sandbox
// user, so the local runtime can bind a workspace as that user: mode 0710,
// group GID) or by nobody else (mode 0700); a workspace folder, and the
// root of its disk image, is the sandbox user's alone (0700); markers and
// images are 0600. Root and the sandbox user read workspaces on the host;
// others go through agentbox (the files API, `agentbox shell`).
//
// A Workspaces is safe for concurrent use.
type Workspaces struct {
	root     string
	uid, gid int
	disk     DiskMode
	keep     time.Duration
	log      *slog.Logger
	idle     sync.WaitGroup // pending and running idle unmounts

	mu    sync.Mutex
	refs  map[string]int        // "user/chat" -> acquisitions in this process
	disks map[string]*diskState // "user/chat" -> its image's state (DiskLoop)
}

// WorkspacesOptions configure NewWorkspacesWith.
type WorkspacesOptions struct {
	// UID and GID own workspace folders: the sandbox user (1000:1000 in
	// the sandbox image). A negative UID leaves ownership alone (for a
	// server that does not run as root).
	UID, GID int
	// Disk is how disk limits are enforced (DetectDiskMode says what the
	// host allows); DiskNone ignores them.
	Disk DiskMode
	// KeepMounted is how long a workspace image stays mounted after its
	// last release, so the next turn of a chat (usually seconds later)
	// need not mount it again and host tools see its files meanwhile
	// (0: unmounted at once). Close unmounts what is still kept; a process
	// that ends without Close leaves them for the next one's Recover.
	KeepMounted time.Duration
	// Logger receives what cannot be returned (an unmount that failed on
	// release, a limit that could not be applied); nil: slog.Default().
	Logger *slog.Logger
}

// NewWorkspaces manages the workspaces under {dataRoot}/workspaces, creating
// that folder when missing, without disk limits. Workspace folders are
// owned by uid:gid, the sandbox user (1000:1000 in the sandbox image); a
// negative uid leaves ownership alone (for a server that does not run as
// root).
func NewWorkspaces(dataRoot string, uid, gid int) (*Workspaces, error) {
	return NewWorkspacesWith(dataRoot, WorkspacesOptions{UID: uid, GID: gid})
}

// NewWorkspacesWith manages the workspaces under {dataRoot}/workspaces as
// opts say, creating that folder when missing. It mounts nothing: a
// server calls Recover once at start for what a crashed one left.
func NewWorkspacesWith(dataRoot string, opts WorkspacesOptions) (*Workspaces, error) {
	if dataRoot == "" {
		return nil, errors.New("workspaces: data root is empty")
	}
	abs, err := filepath.Abs(dataRoot)
	if err != nil {
		return nil, fmt.Errorf("workspaces: data root: %w", err)
	}
	root := filepath.Join(abs, "workspaces")
	w := &Workspaces{root: root, uid: opts.UID, gid: opts.GID}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("workspaces: %w", err)
		}
		if err := w.guardDir(abs); err != nil {
			return nil, fmt.Errorf("workspaces: data root: %w", err)
		}
	}
	if err := w.guardDir(root); err != nil {
		return nil, fmt.Errorf("workspaces: %w", err)
	}
	switch opts.Disk {
	case DiskNone, DiskLoop, DiskWatch:
	default:
		return nil, fmt.Errorf("workspaces: unknown disk mode %q (want %q or %q)", opts.Disk, DiskLoop, DiskWatch)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	w.disk, w.keep, w.log = opts.Disk, max(0, opts.KeepMounted), opts.Logger
	w.refs, w.disks = map[string]int{}, map[string]*diskState{}
	return w, nil
}

// guardDir creates dir, a folder above workspaces, when missing, and
// gives it (a new one, or one an earlier version left readable by
// everyone) its owner-only mode: 0710 with the sandbox user's group when
// there is a sandbox user, else 0700.
func (w *Workspaces) guardDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder", dir)
	}
	mode := os.FileMode(0o700)
	if w.uid >= 0 {
		mode = 0o710
		if s, ok := st.Sys().(*syscall.Stat_t); ok && int(s.Gid) != w.gid {
			if err := os.Lchown(dir, -1, w.gid); err != nil {
				return err
			}
		}
	}
	if st.Mode().Perm() != mode {
		return os.Chmod(dir, mode)
	}
	return nil
}

// DiskMode returns how the workspaces' disk limits are enforced.
func (w *Workspaces) DiskMode() DiskMode { return w.disk }

// Root returns the folder holding all workspaces ({dataRoot}/workspaces).
func (w *Workspaces) Root() string { return w.root }

// Path returns the host folder of the workspace of (user, chat), after
// validating both ids. The folder may not exist yet.
func (w *Workspaces) Path(user, chat string) (string, error) {
	if err := validateIDs(user, chat); err != nil {
		return "", err
	}
	return filepath.Join(w.root, user, chat), nil
}

func validateIDs(user, chat string) error {
	if err := ValidateID("user", user); err != nil {
		return err
	}
	return ValidateID("chat", chat)
}

func (w *Workspaces) marker(user, chat string) string {
	return markerPath(w.root, user, chat)
}

// markerPath is the last-use marker of (user, chat) under root.
func markerPath(root, user, chat string) string {
	return filepath.Join(root, user, "."+chat+".lastuse")
}

// AcquireOptions tune AcquireWith.
type AcquireOptions struct {
	// MaxDisk is the workspace's disk limit in bytes (sandbox.max_disk).
	// 0 keeps what the workspace has: its image at its size, or no limit.
	MaxDisk int64
}

// Acquire opens the workspace of (user, chat), creating it when missing,
// marks it in use and records its last use. release records the last use
// again, closes ws and drops the in-use mark; it is idempotent. The
// workspace is never pruned between Acquire and release. It is
// AcquireWith without options: a workspace with a disk image is mounted
// at the image's size, one without gets no limit.
func (w *Workspaces) Acquire(ctx context.Context, user, chat string) (ws *Workspace, release func(), err error) {
	return w.AcquireWith(ctx, user, chat, AcquireOptions{})
}

// AcquireWith is Acquire with a disk limit. In DiskLoop mode the
// workspace becomes an image of opts.MaxDisk bytes (rounded down to whole
// MiB, at least MinDisk): a new one is created empty; an existing folder
// is copied into a new image (once; when its files do not fit, the image
// is made just big enough, and shrinks to the limit on a later acquire
// once files were deleted); an image of another size is resized when no
// one else has it mounted. The image is mounted at the folder until the
// last release in this process (and no other process holds it), which
// unmounts it and detaches its loop device. In DiskWatch mode the limit
// is only recorded, for WatchDisk. ws.Disk() says what applies.
func (w *Workspaces) AcquireWith(ctx context.Context, user, chat string, opts AcquireOptions) (ws *Workspace, release func(), err error) {
	if opts.MaxDisk < 0 {
		return nil, nil, fmt.Errorf("workspace %s/%s: negative disk limit %d", user, chat, opts.MaxDisk)
	}
	if err := validateIDs(user, chat); err != nil {
		return nil, nil, err
	}
	var lock *os.File
	for attempt := 0; ; attempt++ {
		lock, err = w.lockShared(ctx, user, chat)
		if err == nil {
			break
		}
		if !errors.Is(err, errRetry) || attempt >= 20 {
			return nil, nil, fmt.Errorf("workspace %s/%s: %w", user, chat, err)
		}
	}
	marker := lock.Name()
	touch(marker)
	dir := filepath.Join(w.root, user, chat)
	key := user + "/" + chat
	// In use from here: a prune in this process spares it while its disk
	// is attached.
	w.mu.Lock()
	w.refs[key]++
	w.mu.Unlock()
	unref := func() {
		w.mu.Lock()
		if w.refs[key]--; w.refs[key] <= 0 {
			delete(w.refs, key)
		}
		w.mu.Unlock()
	}
	limit, detach, err := w.attach(ctx, lock, user, chat, dir, opts.MaxDisk)
	if err != nil {
		unref()
		lock.Close()
		return nil, nil, fmt.Errorf("workspace %s/%s: %w", user, chat, err)
	}
	ws, err = OpenWorkspace(dir, w.uid, w.gid)
	if err != nil {
		detach()
		unref()
		lock.Close()
		return nil, nil, fmt.Errorf("workspace %s/%s: %w", user, chat, err)
	}
	ws.disk = limit
	release = sync.OnceFunc(func() {
		touch(marker)
		ws.Close() // before detach: an open handle keeps the mount busy
		detach()
		unref()
		lock.Close() // drops the shared lock
	})
	return ws, release, nil
}

// errRetry: the marker changed under us (a prune removed it); try again.
var errRetry = errors.New("workspace changed while acquiring it, retry")

// lockShared opens (creating) the marker of (user, chat) and takes a shared
// flock on it, waiting while a prune holds the exclusive one.
func (w *Workspaces) lockShared(ctx context.Context, user, chat string) (*os.File, error) {
	if err := w.guardDir(filepath.Join(w.root, user)); err != nil {
		return nil, err
	}
	marker := w.marker(user, chat)
	f, err := os.OpenFile(marker, os.O_RDONLY|os.O_CREATE, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errRetry // the user folder was pruned meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("last-use marker: %w", err)
	}
	// A prune holds the workspace for the few milliseconds it takes to
	// move it away.
	if err := flock.Lock(ctx, f, false, 2*time.Millisecond); err != nil {
		f.Close()
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("lock: %w", err)
	}
	if !samePath(f, marker) {
		f.Close()
		return nil, errRetry
	}
	return f, nil
}

// samePath reports whether f is still the file at p (a prune may have
// unlinked it while we waited for the lock).
func samePath(f *os.File, p string) bool {
	fst, err := f.Stat()
	if err != nil {
		return false
	}
	pst, err := os.Stat(p)
	return err == nil && os.SameFile(fst, pst)
}

func touch(p string) {
	now := time.Now()
	_ = os.Chtimes(p, now, now)
}

// InUse reports whether this process has (user, chat) acquired.
func (w *Workspaces) InUse(user, chat string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.refs[user+"/"+chat] > 0
}

// LastUse returns when the workspace of (user, chat) was last acquired or
// released. A workspace without a marker reports its folder's modification
// time; a missing workspace is ErrNotFound.
func (w *Workspaces) LastUse(user, chat string) (time.Time, error) {
	dir, err := w.Path(user, chat)
	if err != nil {
		return time.Time{}, err
	}
	if st, err := os.Stat(w.marker(user, chat)); err == nil {
		return st.ModTime(), nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, fmt.Errorf("workspace %s/%s: %w", user, chat, ErrNotFound)
		}
		return time.Time{}, fmt.Errorf("workspace %s/%s: %w", user, chat, err)
	}
	return st.ModTime(), nil
}

// SetLastUse records t as the last use of the existing workspace of (user,
// chat): for imports and tests.
func (w *Workspaces) SetLastUse(user, chat string, t time.Time) error {
	dir, err := w.Path(user, chat)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("workspace %s/%s: %w", user, chat, ErrNotFound)
		}
		return fmt.Errorf("workspace %s/%s: %w", user, chat, err)
	}
	m := w.marker(user, chat)
	f, err := os.OpenFile(m, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("workspace %s/%s: last-use marker: %w", user, chat, err)
	}
	f.Close()
	return os.Chtimes(m, t, t)
}
