package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"golang.org/x/sys/unix"
)

// Source is what a checkpoint records.
type Source struct {
	// Dir is the chat's workspace folder on this host ("": the chat has
	// none, the checkpoint holds its memory only).
	Dir string
	// Memory is the chat's hook memory (its chat namespace): key to JSON
	// value. Nil or empty: none.
	Memory map[string]json.RawMessage
	// History is the chat's conversation, encoded by the caller (the
	// store keeps the bytes as they are). Nil or empty: none.
	History []byte
}

// Checkpoint describes a recorded checkpoint.
type Checkpoint struct {
	// ID names it: the hash of its commit object, in hex.
	ID string `json:"id"`
	// Files counts the regular files it holds, Bytes their total length.
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// Added is what the capture stored (new objects, compressed), Read
	// what it read of files changed since the chat's last capture.
	Added int64 `json:"added"`
	Read  int64 `json:"read"`
	// Skipped counts what it did not record: FIFOs, sockets, devices,
	// other filesystems mounted inside, folders it may not read.
	Skipped int `json:"skipped,omitempty"`
	// Duration is how long the capture took.
	Duration time.Duration `json:"-"`
}

// racyWindow: a file whose times are this close to the start of a
// capture may be written again without its times changing (timestamps
// are as coarse as the kernel's clock tick), so it is read again at the
// next capture.
const racyWindow = time.Second

// Capture records src as a checkpoint of the user's chat. It reads only
// the files whose stat changed since the chat's last capture or restore,
// and stores only what the store does not hold yet.
//
// The checkpoint is kept (as a pending root of Collect) until done is
// called: the caller calls it once it recorded the id where Collect's
// roots come from (the chat's turn in the database), or gave up; a
// process that dies before leaves it pending for a day.
func (s *Store) Capture(ctx context.Context, user, chat string, src Source) (cp *Checkpoint, done func(), err error) {
	start := time.Now()
	if err := checkID("chat", chat); err != nil {
		return nil, nil, err
	}
	u, unlock, err := s.enter(ctx, user, false)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	w := u.writer()
	defer w.abort()
	c := &capture{ctx: ctx, w: w, old: u.loadIndex(chat), idx: &index{files: map[string]indexEntry{}},
		racyAfter: start.Add(-s.racy).UnixNano()}
	var cm commit
	if src.Dir != "" {
		if cm.files, err = c.root(src.Dir); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", src.Dir, err)
		}
	}
	if cm.memory, err = putMemory(w, src.Memory); err != nil {
		return nil, nil, err
	}
	if len(src.History) > 0 {
		if cm.history, err = w.put(typeHistory, src.History); err != nil {
			return nil, nil, err
		}
	}
	cm.count, cm.bytes = c.files, c.bytes
	id, err := w.put(typeCommit, encodeCommit(cm))
	if err != nil {
		return nil, nil, err
	}
	if err := w.finish(); err != nil {
		return nil, nil, err
	}
	// Pending before the lock goes: a Collect after it keeps the objects.
	done, err = u.addPending(id)
	if err != nil {
		return nil, nil, err
	}
	if src.Dir != "" {
		c.idx.base = id
		if err := u.saveIndex(chat, c.idx); err != nil {
			// The checkpoint stands; the next capture reads every file.
			s.log.Warn("checkpoint index not saved", "user", user, "chat", chat, "error", err)
		}
	}
	return &Checkpoint{ID: id.String(), Files: c.files, Bytes: c.bytes, Added: w.added, Read: c.read,
		Skipped: c.skipped, Duration: time.Since(start)}, done, nil
}

// putMemory stores a memory snapshot (zero hash for none).
func putMemory(w *writer, mem map[string]json.RawMessage) (Hash, error) {
	if len(mem) == 0 {
		return Hash{}, nil
	}
	// Marshal sorts the keys and compacts the values: one memory, one
	// object.
	data, err := json.Marshal(mem)
	if err != nil {
		return Hash{}, fmt.Errorf("%w: memory: %v", ErrInvalid, err)
	}
	return w.put(typeMemory, data)
}

// addPending records id as a root Collect keeps until the returned
// function removes it.
func (u *userStore) addPending(id Hash) (func(), error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	p := u.path(dirPending, id.String()+"."+hex.EncodeToString(b[:]))
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		return nil, fmt.Errorf("checkpoint pending: %w", err)
	}
	return func() {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			u.log.Warn("checkpoint pending root not removed", "path", p, "error", err)
		}
	}, nil
}

// capture is one walk of a workspace.
type capture struct {
	ctx       context.Context
	w         *writer
	old, idx  *index
	racyAfter int64
	dev       uint64

	files, bytes, read int64
	skipped            int
}

// errGone: an entry vanished or was replaced while it was read; it is
// left out.
var errGone = errors.New("entry changed while read")

func (c *capture) root(dir string) (Hash, error) {
	f, err := openDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return Hash{}, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return Hash{}, err
	}
	c.dev = st.Dev
	return c.dir(f, "")
}

// openDirAt opens the folder name of dirfd without following a link and
// without blocking on what is not a folder.
func openDirAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// gone reports whether err says an entry vanished or is no longer what it
// was (a folder swapped for a link or a file).
func gone(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) || errors.Is(err, errGone)
}

// dir records the folder d (rel is its path in the workspace) and its
// content, and returns its tree.
func (c *capture) dir(d *os.File, rel string) (Hash, error) {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return Hash{}, err
	}
	fd := int(d.Fd())
	entries := make([]entry, 0, len(names))
	for _, name := range names {
		if err := c.ctx.Err(); err != nil {
			return Hash{}, err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if gone(err) {
				continue
			}
			return Hash{}, fmt.Errorf("stat %s: %w", path.Join(rel, name), err)
		}
		p := path.Join(rel, name)
		e := entry{name: name, perm: st.Mode & 0o1777, uid: st.Uid, gid: st.Gid, mtime: timespecNS(st.Mtim)}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if st.Dev != c.dev {
				c.skipped++ // another filesystem mounted inside
				continue
			}
			sub, err := openDirAt(fd, name)
			if err != nil {
				if gone(err) {
					continue
				}
				if errors.Is(err, unix.EACCES) {
					c.skipped++
					continue
				}
				return Hash{}, err
			}
			var sst unix.Stat_t
			if err := unix.Fstat(int(sub.Fd()), &sst); err != nil || sst.Ino != st.Ino {
				sub.Close()
				continue // replaced between the stat and the open
			}
			e.kind = kindDir
			e.hash, err = c.dir(sub, p)
			sub.Close()
			if err != nil {
				return Hash{}, err
			}
		case unix.S_IFREG:
			e.kind = kindFile
			e.hash, e.size, err = c.file(fd, name, p, &st)
			if err != nil {
				if gone(err) {
					continue
				}
				if errors.Is(err, unix.EACCES) {
					c.skipped++
					continue
				}
				return Hash{}, fmt.Errorf("read %s: %w", p, err)
			}
		case unix.S_IFLNK:
			e.kind = kindSymlink
			if e.link, err = readlinkAt(fd, name); err != nil {
				if gone(err) || errors.Is(err, unix.EINVAL) {
					continue
				}
				return Hash{}, fmt.Errorf("readlink %s: %w", p, err)
			}
		default:
			c.skipped++
			continue
		}
		entries = append(entries, e)
	}
	return c.w.put(typeTree, encodeTree(entries))
}

func readlinkAt(dirfd int, name string) (string, error) {
	for n := 256; n <= maxName*2; n *= 2 {
		buf := make([]byte, n)
		l, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if l < n {
			if l == 0 {
				return "", unix.EINVAL
			}
			return string(buf[:l]), nil
		}
	}
	return "", unix.ENAMETOOLONG
}

// file records the regular file name of dirfd (st is its stat): its
// content's hash and length. An unchanged file (its index entry matches)
// is not read.
func (c *capture) file(dirfd int, name, rel string, st *unix.Stat_t) (Hash, int64, error) {
	if e, ok := c.old.files[rel]; ok && e.matches(st) {
		e.racy = e.ctime >= c.racyAfter || e.mtime >= c.racyAfter
		c.idx.files[rel] = e
		c.files++
		c.bytes += e.size
		return e.hash, e.size, nil
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		// O_NOATIME needs the file's owner (or CAP_FOWNER).
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return Hash{}, 0, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		return Hash{}, 0, err
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG || before.Ino != st.Ino {
		return Hash{}, 0, errGone
	}
	r := &ctxReader{ctx: c.ctx, r: f}
	first := make([]byte, min(before.Size+1, looseThreshold))
	n, err := io.ReadFull(r, first)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Hash{}, 0, err
	}
	first = first[:n]
	var h Hash
	size := int64(n)
	if n < looseThreshold {
		h, err = c.w.put(typeBlob, first)
	} else {
		h, size, err = c.w.putStream(first, r)
	}
	if err != nil {
		return Hash{}, 0, err
	}
	var after unix.Stat_t
	e := newIndexEntry(&before, h)
	e.racy = e.ctime >= c.racyAfter || e.mtime >= c.racyAfter
	if unix.Fstat(fd, &after) != nil || timespecNS(after.Ctim) != e.ctime || after.Size != size {
		e.racy = true // written while read: what was read may be torn
	}
	c.idx.files[rel] = e
	c.files++
	c.bytes += size
	c.read += size
	return h, size, nil
}

// ctxReader stops reading when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r *ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
