package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pendingTTL is how long a pending root (a capture whose caller did not
// say it recorded or dropped it: a process that died) is kept.
const pendingTTL = 24 * time.Hour

// repackRatio: a pack of which more than this share of bytes is garbage
// is rewritten with its live objects.
const repackRatio = 0.5

// Collected reports what Collect did.
type Collected struct {
	// Objects and Bytes are what it removed.
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// Repacked counts the packs rewritten without their garbage.
	Repacked int `json:"repacked"`
	// Roots counts the checkpoints kept (with pending ones and the chats'
	// indexes' bases).
	Roots int `json:"roots"`
}

// Collect removes the user's objects that none of the checkpoints roots
// returns refers to, nor a capture still pending, nor a chat's index. It
// holds the user's lock exclusively (captures and restores of the user
// wait meanwhile), and calls roots once it holds it, so no checkpoint is
// recorded between the listing and the removal. A root that names no
// stored checkpoint is ignored.
func (s *Store) Collect(ctx context.Context, user string, roots func(context.Context) ([]string, error)) (*Collected, error) {
	u, unlock, err := s.enter(ctx, user, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ids, err := roots(ctx)
	if err != nil {
		return nil, fmt.Errorf("checkpoint roots: %w", err)
	}
	var all []Hash
	for _, id := range ids {
		h, err := ParseHash(id)
		if err != nil {
			return nil, err
		}
		all = append(all, h)
	}
	pending, err := u.pendingRoots()
	if err != nil {
		return nil, err
	}
	bases, err := u.indexBases()
	if err != nil {
		return nil, err
	}
	all = append(append(all, pending...), bases...)
	rd := u.reader()
	defer rd.close()
	m := &marker{ctx: ctx, u: u, rd: rd, seen: map[Hash]bool{}}
	for _, h := range all {
		if err := m.commit(h); err != nil {
			return nil, err
		}
	}
	out := &Collected{Roots: len(all)}
	if err := u.sweepLoose(ctx, m.seen, out); err != nil {
		return out, err
	}
	rd.close()
	rd.files = map[string]*os.File{}
	if err := u.sweepPacks(ctx, m.seen, out); err != nil {
		return out, err
	}
	// Nothing writes to tmp while the lock is exclusive: what is there
	// was left by a process that died.
	if ents, err := os.ReadDir(u.path(dirTmp)); err == nil {
		for _, e := range ents {
			_ = os.Remove(u.path(dirTmp, e.Name()))
		}
	}
	return out, nil
}

// pendingRoots lists the pending captures' checkpoints, removing those
// older than pendingTTL.
func (u *userStore) pendingRoots() ([]Hash, error) {
	ents, err := os.ReadDir(u.path(dirPending))
	if err != nil {
		return nil, fmt.Errorf("checkpoint pending: %w", err)
	}
	var out []Hash
	for _, e := range ents {
		id, _, _ := strings.Cut(e.Name(), ".")
		h, err := ParseHash(id)
		info, ierr := e.Info()
		if err != nil || ierr != nil || time.Since(info.ModTime()) > pendingTTL {
			_ = os.Remove(u.path(dirPending, e.Name()))
			continue
		}
		out = append(out, h)
	}
	return out, nil
}

// marker marks the objects checkpoints refer to.
type marker struct {
	ctx  context.Context
	u    *userStore
	rd   *reader
	seen map[Hash]bool
	// size, when set, is called with each object marked the first time.
	size func(Hash)
}

func (m *marker) mark(h Hash) bool {
	if h.IsZero() || m.seen[h] {
		return false
	}
	m.seen[h] = true
	if m.size != nil {
		m.size(h)
	}
	return true
}

// commit marks checkpoint h and what it refers to. A checkpoint or tree
// that is missing or damaged keeps what is left of it (and is logged):
// the rest of the user's checkpoints are still collected.
func (m *marker) commit(h Hash) error {
	if m.seen[h] {
		return nil
	}
	cm, err := readCommit(m.rd, h)
	if err != nil {
		return m.damaged(h, err)
	}
	m.mark(h)
	m.mark(cm.memory)
	m.mark(cm.history)
	return m.tree(cm.files)
}

func (m *marker) damaged(h Hash, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt) {
		if m.size == nil {
			m.u.log.Warn("checkpoint object missing or damaged", "user", m.u.name(), "object", h, "error", err)
		}
		return nil
	}
	return err
}

func (m *marker) tree(h Hash) error {
	if !m.mark(h) {
		return nil
	}
	if err := m.ctx.Err(); err != nil {
		return err
	}
	entries, err := readTree(m.rd, h)
	if err != nil {
		return m.damaged(h, err)
	}
	for _, e := range entries {
		switch e.kind {
		case kindFile:
			m.mark(e.hash)
		case kindDir:
			if err := m.tree(e.hash); err != nil {
				return err
			}
		}
	}
	return nil
}

// sweepLoose removes the loose objects not in live.
func (u *userStore) sweepLoose(ctx context.Context, live map[Hash]bool, out *Collected) error {
	fans, err := os.ReadDir(u.path(dirObjects))
	if err != nil {
		return fmt.Errorf("checkpoint objects: %w", err)
	}
	for _, fan := range fans {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := u.path(dirObjects, fan.Name())
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			h, err := ParseHash(fan.Name() + e.Name())
			if err == nil && live[h] {
				continue
			}
			info, ierr := e.Info()
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("checkpoint sweep: %w", err)
			}
			out.Objects++
			if ierr == nil {
				out.Bytes += info.Size()
			}
		}
		if len(ents) > 0 {
			_ = os.Remove(dir) // when empty
		}
	}
	return nil
}

// sweepPacks removes the packs with no live object and rewrites those
// mostly garbage.
func (u *userStore) sweepPacks(ctx context.Context, live map[Hash]bool, out *Collected) error {
	type stat struct {
		liveBytes, deadBytes int64
		live, dead           []Hash
	}
	u.mu.Lock()
	stats := map[*packInfo]*stat{}
	for h, l := range u.objs {
		st := stats[l.pack]
		if st == nil {
			st = &stat{}
			stats[l.pack] = st
		}
		if live[h] {
			st.liveBytes += int64(l.n)
			st.live = append(st.live, h)
		} else {
			st.deadBytes += int64(l.n)
			st.dead = append(st.dead, h)
		}
	}
	packs := make([]*packInfo, 0, len(u.packs))
	for _, p := range u.packs {
		packs = append(packs, p)
	}
	u.mu.Unlock()
	for _, p := range packs {
		if err := ctx.Err(); err != nil {
			return err
		}
		st := stats[p]
		if st == nil {
			st = &stat{}
		}
		switch {
		case len(st.live) == 0:
		case float64(st.deadBytes) > repackRatio*float64(st.liveBytes+st.deadBytes):
			if err := u.repack(p, st.live); err != nil {
				return err
			}
			out.Repacked++
		default:
			continue
		}
		if err := os.Remove(u.path(dirPacks, p.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checkpoint sweep: %w", err)
		}
		out.Objects += len(st.dead)
		out.Bytes += p.size
		if len(st.live) > 0 {
			out.Bytes -= st.liveBytes
		}
	}
	return u.refresh()
}

// repack copies the live objects of pack p into a new pack.
func (u *userStore) repack(p *packInfo, live []Hash) error {
	f, err := os.Open(u.path(dirPacks, p.name))
	if err != nil {
		return fmt.Errorf("repack: %w", err)
	}
	defer f.Close()
	w := u.writer()
	defer w.abort()
	for _, h := range live {
		l, ok := u.lookup(h)
		if !ok || l.pack != p {
			continue
		}
		rec := make([]byte, l.n)
		if _, err := f.ReadAt(rec, l.off); err != nil {
			return fmt.Errorf("repack: %w", err)
		}
		// Re-added even though the old pack has it: it is going.
		if err := w.putPacked(h, rec); err != nil {
			return err
		}
	}
	return w.finish()
}

// Sizes returns, for the user's checkpoints ids, newest first, what each
// holds that none listed before it does: the stored bytes of the objects
// that only it and older ones refer to. Removing checkpoints oldest first
// frees about their sizes (objects other chats share are counted too). An
// id that names no stored checkpoint has size 0.
func (s *Store) Sizes(ctx context.Context, user string, ids []string) ([]int64, error) {
	u, unlock, err := s.enter(ctx, user, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rd := u.reader()
	defer rd.close()
	out := make([]int64, len(ids))
	var cur *int64
	m := &marker{ctx: ctx, u: u, rd: rd, seen: map[Hash]bool{}, size: func(h Hash) {
		if n, ok := u.size(h); ok {
			*cur += n
		}
	}}
	for i, id := range ids {
		h, err := ParseHash(id)
		if err != nil {
			return nil, err
		}
		cur = &out[i]
		if err := m.commit(h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UserBytes returns what the user's checkpoints take on disk: packs,
// objects and indexes, by their allocated blocks.
func (s *Store) UserBytes(ctx context.Context, user string) (int64, error) {
	if err := checkID("user", user); err != nil {
		return 0, err
	}
	return diskUsage(ctx, filepath.Join(s.root, user))
}

// Bytes returns what the whole store takes on disk.
func (s *Store) Bytes(ctx context.Context) (int64, error) {
	return diskUsage(ctx, s.root)
}

// ForgetChat removes the chat's index and log (the chat was deleted): its
// checkpoints stop being roots of Collect.
func (s *Store) ForgetChat(user, chat string) error {
	if err := checkID("chat", chat); err != nil {
		return err
	}
	u, err := s.user(user)
	if err != nil {
		return err
	}
	if err := os.Remove(u.indexPath(chat)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkpoint index: %w", err)
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return u.removeLog(chat)
}

// Users lists the users that have checkpoints.
func (s *Store) Users() ([]string, error) {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && checkID("user", e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// diskUsage sums the allocated blocks of everything under dir.
func diskUsage(ctx context.Context, dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		total += allocated(info)
		return nil
	})
	return total, err
}
