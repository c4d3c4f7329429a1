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

	"golang.org/x/sync/errgroup"
)

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

// inUseSet is the set of workspaces a request of this process holds: a
// prune spares them. (Other processes' requests are seen through the
// marker locks.) Workspaces is the one in use; tests give their own.
type inUseSet interface {
	InUse(user, chat string) bool
}

// pruner removes the stale workspaces under root. It holds no state of its
// own between prunes.
type pruner struct {
	root  string
	inUse inUseSet
}

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
	return (&pruner{root: w.root, inUse: w}).prune(ctx, opts)
}

func (pr *pruner) prune(ctx context.Context, opts PruneOptions) (*PruneReport, error) {
	if opts.OlderThan <= 0 {
		return nil, fmt.Errorf("prune: retention must be positive, got %s", opts.OlderThan)
	}
	start := time.Now()
	now := opts.Now
	if now.IsZero() {
		now = start
	}
	rep := &PruneReport{DryRun: opts.DryRun, Cutoff: now.Add(-opts.OlderThan), Removed: []PrunedWorkspace{}}

	users, err := os.ReadDir(pr.root)
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
		c, err := pr.scanUser(u.Name(), opts.DryRun)
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

	var mu sync.Mutex // guards rep, errs and handled
	handled := 0
	var g errgroup.Group
	g.SetLimit(pruneWorkers)
	for _, c := range cands {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil // stopped between workspaces
			}
			p, outcome, err := pr.pruneOne(c, rep.Cutoff, opts.DryRun)
			mu.Lock()
			defer mu.Unlock()
			handled++
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
			return nil // one workspace's failure does not stop the others
		})
	}
	_ = g.Wait()
	if handled < len(cands) {
		errs = append(errs, ctx.Err())
	}

	if !opts.DryRun {
		seen := map[string]bool{}
		for _, p := range rep.Removed {
			if !seen[p.User] {
				seen[p.User] = true
				_ = os.Remove(filepath.Join(pr.root, p.User)) // only when empty
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
func (pr *pruner) scanUser(user string, dryRun bool) ([]pruneCandidate, error) {
	udir := filepath.Join(pr.root, user)
	entries, err := os.ReadDir(udir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("prune: user %s: %w", user, err)
	}
	markers := map[string]time.Time{}
	images := map[string]fs.DirEntry{}
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
		case strings.HasPrefix(name, ".") && strings.HasSuffix(name, imageSuffix) && ValidateID("chat", name[1:len(name)-len(imageSuffix)]) == nil:
			images[name[1:len(name)-len(imageSuffix)]] = e
		case e.IsDir() && ValidateID("chat", name) == nil:
			dirs = append(dirs, e)
		}
	}
	// A disk image is a workspace too, also without its mount point
	// folder (a prune interrupted between the two).
	for _, d := range dirs {
		delete(images, d.Name())
	}
	for _, e := range images {
		dirs = append(dirs, e)
	}
	out := make([]pruneCandidate, 0, len(dirs))
	for _, d := range dirs {
		chat := d.Name()
		if !d.IsDir() {
			chat = chat[1 : len(chat)-len(imageSuffix)]
		}
		c := pruneCandidate{user: user, chat: chat}
		if t, ok := markers[chat]; ok {
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
func (pr *pruner) pruneOne(c pruneCandidate, cutoff time.Time, dryRun bool) (PrunedWorkspace, pruneOutcome, error) {
	p := PrunedWorkspace{User: c.user, Chat: c.chat, LastUse: c.lastUse.UTC()}
	if pr.inUse.InUse(c.user, c.chat) {
		return p, outcomeInUse, nil
	}
	dir := filepath.Join(pr.root, c.user, c.chat)
	marker := markerPath(pr.root, c.user, c.chat)
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
		p.Bytes = dirSize(dir) + imageBytes(imagePath(pr.root, c.user, c.chat))
		return p, outcomeRemoved, nil
	}

	created := false
	f, err := os.Open(marker)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(marker, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
	// A disk image mounted here is a crash's leftover (no one holds the
	// lock): unmount it first, so the folder moves empty and the image's
	// loop device is detached.
	if err := unmount(dir); err != nil {
		if created {
			_ = os.Remove(marker)
		}
		return p, 0, fmt.Errorf("prune %s/%s: %w", c.user, c.chat, err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	trash := filepath.Join(pr.root, c.user, "."+c.chat+".trash-"+hex.EncodeToString(suffix[:]))
	img := imagePath(pr.root, c.user, c.chat)
	if err := os.Rename(dir, trash); err != nil {
		_, ierr := os.Lstat(img)
		switch {
		case errors.Is(err, fs.ErrNotExist) && ierr == nil:
			trash = "" // an image without its mount point folder
		case errors.Is(err, fs.ErrNotExist):
			if created {
				_ = os.Remove(marker)
			}
			return p, outcomeKept, nil
		default:
			if created {
				_ = os.Remove(marker)
			}
			return p, 0, fmt.Errorf("prune %s/%s: %w", c.user, c.chat, err)
		}
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return p, 0, fmt.Errorf("prune %s/%s: marker: %w", c.user, c.chat, err)
	}
	// The image goes too; a loop device a leftover container still holds
	// keeps its blocks until the container is gone (autoclear).
	p.Bytes = imageBytes(img)
	if err := os.Remove(img); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return p, 0, fmt.Errorf("prune %s/%s: disk image: %w", c.user, c.chat, err)
	}
	if trash == "" {
		return p, outcomeRemoved, nil
	}
	n, err := removeTree(trash)
	p.Bytes += n
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
	f, err := openDir(dir)
	if err != nil {
		return 0, err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
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

// dirSize sums the sizes of the regular files under dir, without
// following symlinks or opening anything but folders (walkTree).
func dirSize(dir string) int64 {
	n, _, _ := treeUsage(context.Background(), dir)
	return n
}

// imageBytes is what the disk image img takes on the host (0: none).
func imageBytes(img string) int64 {
	st, err := os.Lstat(img)
	if err != nil {
		return 0
	}
	return diskBytes(st)
}
