package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
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
// A Workspaces is safe for concurrent use.
type Workspaces struct {
	root     string
	uid, gid int

	mu   sync.Mutex
	refs map[string]int // "user/chat" -> acquisitions in this process
}

// NewWorkspaces manages the workspaces under {dataRoot}/workspaces, creating
// that folder when missing. Workspace folders are owned by uid:gid, the
// sandbox user (1000:1000 in the sandbox image); a negative uid leaves
// ownership alone (for a server that does not run as root).
func NewWorkspaces(dataRoot string, uid, gid int) (*Workspaces, error) {
	if dataRoot == "" {
		return nil, errors.New("workspaces: data root is empty")
	}
	abs, err := filepath.Abs(dataRoot)
	if err != nil {
		return nil, fmt.Errorf("workspaces: data root: %w", err)
	}
	root := filepath.Join(abs, "workspaces")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("workspaces: %w", err)
	}
	return &Workspaces{root: root, uid: uid, gid: gid, refs: map[string]int{}}, nil
}

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
	return filepath.Join(w.root, user, "."+chat+".lastuse")
}

// Acquire opens the workspace of (user, chat), creating it when missing,
// marks it in use and records its last use. release records the last use
// again, closes ws and drops the in-use mark; it is idempotent. The
// workspace is never pruned between Acquire and release.
func (w *Workspaces) Acquire(ctx context.Context, user, chat string) (ws *Workspace, release func(), err error) {
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
	ws, err = OpenWorkspace(dir, w.uid, w.gid)
	if err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("workspace %s/%s: %w", user, chat, err)
	}
	key := user + "/" + chat
	w.mu.Lock()
	w.refs[key]++
	w.mu.Unlock()
	release = sync.OnceFunc(func() {
		touch(marker)
		ws.Close()
		w.mu.Lock()
		if w.refs[key]--; w.refs[key] <= 0 {
			delete(w.refs, key)
		}
		w.mu.Unlock()
		lock.Close() // drops the shared lock
	})
	return ws, release, nil
}

// errRetry: the marker changed under us (a prune removed it); try again.
var errRetry = errors.New("workspace changed while acquiring it, retry")

// lockShared opens (creating) the marker of (user, chat) and takes a shared
// flock on it, waiting while a prune holds the exclusive one.
func (w *Workspaces) lockShared(ctx context.Context, user, chat string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Join(w.root, user), 0o755); err != nil {
		return nil, err
	}
	marker := w.marker(user, chat)
	f, err := os.OpenFile(marker, os.O_RDONLY|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errRetry // the user folder was pruned meanwhile
	}
	if err != nil {
		return nil, fmt.Errorf("last-use marker: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock: %w", err)
		}
		// A prune holds the workspace for the few milliseconds it takes to
		// move it away.
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
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
	f, err := os.OpenFile(m, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("workspace %s/%s: last-use marker: %w", user, chat, err)
	}
	f.Close()
	return os.Chtimes(m, t, t)
}

// PruneOptions says what Prune removes.
type PruneOptions struct {
	// OlderThan is the retention: workspaces not used within it are
	// removed. It must be positive.
	OlderThan time.Duration
	// DryRun reports what would be removed without removing anything.
	DryRun bool
	// Now is the reference time (zero: time.Now()).
	Now time.Time
}

// PrunedWorkspace is one workspace a prune removed, would remove or spared.
type PrunedWorkspace struct {
	User    string    `json:"user"`
	Chat    string    `json:"chat"`
	LastUse time.Time `json:"last_use"`
	// Bytes is the size of its files (removed ones only).
	Bytes int64 `json:"bytes,omitempty"`
}

// PruneReport is what a prune did.
type PruneReport struct {
	DryRun bool      `json:"dry_run"`
	Cutoff time.Time `json:"cutoff"`
	// Removed lists the workspaces removed (or, with DryRun, that would be),
	// sorted by user and chat.
	Removed []PrunedWorkspace `json:"removed"`
	// InUse lists stale workspaces spared because a request uses them.
	InUse []PrunedWorkspace `json:"in_use,omitempty"`
	// Kept counts workspaces used within the retention period.
	Kept int `json:"kept"`
	// FreedBytes sums Removed[].Bytes.
	FreedBytes int64         `json:"freed_bytes"`
	Duration   time.Duration `json:"duration"`
}

// pruneWorkers bounds the removals running at once.
const pruneWorkers = 4

type pruneCandidate struct {
	user, chat string
	lastUse    time.Time
	hasMarker  bool
}

type pruneOutcome int

const (
	outcomeRemoved pruneOutcome = iota
	outcomeInUse
	outcomeKept
)

// Prune removes the workspaces not used within opts.OlderThan, never one in
// use (acquired before or during the prune), and reports what it removed.
// Errors on single workspaces do not stop it: they are joined into the
// returned error, next to a report of everything else. ctx ending stops it
// between workspaces.
func (w *Workspaces) Prune(ctx context.Context, opts PruneOptions) (*PruneReport, error) {
	if opts.OlderThan <= 0 {
		return nil, fmt.Errorf("prune: retention must be positive, got %s", opts.OlderThan)
	}
	start := time.Now()
	now := opts.Now
	if now.IsZero() {
		now = start
	}
	rep := &PruneReport{DryRun: opts.DryRun, Cutoff: now.Add(-opts.OlderThan), Removed: []PrunedWorkspace{}}

	users, err := os.ReadDir(w.root)
	if err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}
	var errs []error
	var cands []pruneCandidate
	for _, u := range users {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		if !u.IsDir() || ValidateID("user", u.Name()) != nil {
			continue
		}
		c, err := w.scanUser(u.Name(), rep.Cutoff, opts.DryRun)
		if err != nil {
			errs = append(errs, err)
		}
		for _, x := range c {
			if x.lastUse.After(rep.Cutoff) {
				rep.Kept++
			} else {
				cands = append(cands, x)
			}
		}
	}

	var mu sync.Mutex
	jobs := make(chan pruneCandidate)
	var wg sync.WaitGroup
	for range min(pruneWorkers, max(1, len(cands))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				p, outcome, err := w.pruneOne(c, rep.Cutoff, opts.DryRun)
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case outcome == outcomeRemoved:
					rep.Removed = append(rep.Removed, p)
					rep.FreedBytes += p.Bytes
				case outcome == outcomeInUse:
					rep.InUse = append(rep.InUse, p)
				default:
					rep.Kept++
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, c := range cands {
		select {
		case jobs <- c:
		case <-ctx.Done():
			errs = append(errs, ctx.Err())
			break feed
		}
	}
	close(jobs)
	wg.Wait()

	if !opts.DryRun {
		seen := map[string]bool{}
		for _, p := range rep.Removed {
			if !seen[p.User] {
				seen[p.User] = true
				_ = os.Remove(filepath.Join(w.root, p.User)) // only when empty
			}
		}
	}
	sortPruned(rep.Removed)
	sortPruned(rep.InUse)
	rep.Duration = time.Since(start)
	return rep, errors.Join(errs...)
}

func sortPruned(s []PrunedWorkspace) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].User != s[j].User {
			return s[i].User < s[j].User
		}
		return s[i].Chat < s[j].Chat
	})
}

// scanUser lists the workspaces of user with their last use, and clears
// leftovers of interrupted prunes.
func (w *Workspaces) scanUser(user string, cutoff time.Time, dryRun bool) ([]pruneCandidate, error) {
	udir := filepath.Join(w.root, user)
	entries, err := os.ReadDir(udir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("prune: user %s: %w", user, err)
	}
	markers := map[string]time.Time{}
	var dirs []fs.DirEntry
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".lastuse"):
			if st, err := e.Info(); err == nil {
				markers[strings.TrimSuffix(name[1:], ".lastuse")] = st.ModTime()
			}
		case strings.HasPrefix(name, ".") && strings.Contains(name, ".trash-"):
			if !dryRun {
				_ = os.RemoveAll(filepath.Join(udir, name)) // an interrupted prune's leftover
			}
		case e.IsDir() && ValidateID("chat", name) == nil:
			dirs = append(dirs, e)
		}
	}
	out := make([]pruneCandidate, 0, len(dirs))
	for _, d := range dirs {
		c := pruneCandidate{user: user, chat: d.Name()}
		if t, ok := markers[d.Name()]; ok {
			c.lastUse, c.hasMarker = t, true
		} else if st, err := d.Info(); err == nil {
			c.lastUse = st.ModTime()
		} else {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// pruneOne removes one stale workspace unless it is in use or was used
// since the scan. It holds the exclusive lock on the marker while it moves
// the folder away, so an Acquire racing with it either wins (and the
// workspace is spared) or waits and gets a fresh folder.
func (w *Workspaces) pruneOne(c pruneCandidate, cutoff time.Time, dryRun bool) (PrunedWorkspace, pruneOutcome, error) {
	p := PrunedWorkspace{User: c.user, Chat: c.chat, LastUse: c.lastUse.UTC()}
	if w.InUse(c.user, c.chat) {
		return p, outcomeInUse, nil
	}
	dir := filepath.Join(w.root, c.user, c.chat)
	marker := w.marker(c.user, c.chat)
	if dryRun {
		if c.hasMarker {
			f, err := os.Open(marker)
			if err == nil {
				defer f.Close()
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
					return p, outcomeInUse, nil
				}
			}
		}
		p.Bytes = dirSize(dir)
		return p, outcomeRemoved, nil
	}

	created := false
	f, err := os.Open(marker)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(marker, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644)
		created = err == nil
	}
	if err != nil {
		return p, 0, fmt.Errorf("prune %s/%s: last-use marker: %w", c.user, c.chat, err)
	}
	defer f.Close() // releases the exclusive lock, after the marker is gone
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return p, outcomeInUse, nil
		}
		return p, 0, fmt.Errorf("prune %s/%s: lock: %w", c.user, c.chat, err)
	}
	if !samePath(f, marker) {
		return p, outcomeKept, nil // replaced meanwhile: someone used it
	}
	if !created {
		st, err := f.Stat()
		if err != nil {
			return p, 0, fmt.Errorf("prune %s/%s: %w", c.user, c.chat, err)
		}
		if st.ModTime().After(cutoff) {
			return p, outcomeKept, nil // used since the scan
		}
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	trash := filepath.Join(w.root, c.user, "."+c.chat+".trash-"+hex.EncodeToString(suffix[:]))
	if err := os.Rename(dir, trash); err != nil {
		if created {
			_ = os.Remove(marker)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return p, outcomeKept, nil
		}
		return p, 0, fmt.Errorf("prune %s/%s: %w", c.user, c.chat, err)
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return p, 0, fmt.Errorf("prune %s/%s: marker: %w", c.user, c.chat, err)
	}
	n, err := removeTree(trash)
	p.Bytes = n
	if err != nil {
		if err := os.RemoveAll(trash); err != nil {
			return p, 0, fmt.Errorf("prune %s/%s: %w", c.user, c.chat, err)
		}
	}
	return p, outcomeRemoved, nil
}

// removeTree removes dir and everything under it, never following
// symlinks, and returns the bytes of the regular files it removed: sizing
// and removal in one pass.
func removeTree(dir string) (int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			k, err := removeTree(p)
			n += k
			if err != nil {
				return n, err
			}
			continue
		}
		if e.Type().IsRegular() {
			if st, err := e.Info(); err == nil {
				n += st.Size()
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, err
		}
	}
	return n, os.Remove(dir)
}

// dirSize sums the sizes of the regular files under dir, without following
// symlinks.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if st, err := d.Info(); err == nil {
				n += st.Size()
			}
		}
		return nil
	})
	return n
}
