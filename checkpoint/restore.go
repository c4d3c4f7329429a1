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
	"unsafe"

	"golang.org/x/sys/unix"
)

// Restored describes a restore.
type Restored struct {
	// Memory is the checkpoint's hook memory (empty: none), History its
	// history as Capture was given it (nil: none).
	Memory  map[string]json.RawMessage
	History []byte
	// Workspace: the checkpoint holds a workspace's files.
	Workspace bool
	// Files and Bytes describe the files restored: how many regular
	// files the workspace holds now, their total length.
	Files int64
	Bytes int64
	// Written counts the files, folders and links written (the others
	// were as the checkpoint has them), Removed the entries removed.
	Written, Removed int64
	Duration         time.Duration
}

// maxTree bounds a tree object (a folder of about a million names).
const maxTree = 128 << 20

// Restore makes the folder dir, the chat's workspace, hold exactly the
// files, folders and links of the user's checkpoint id, and returns the
// checkpoint's memory. With dir "" it returns the memory only. What is
// already as the checkpoint has it is left alone (the chat's index tells
// an unchanged file without reading it); a file is written to a new name
// beside it and renamed into place; what the checkpoint does not have is
// removed. Owners are restored when the process runs as root. The chat's
// index then describes dir, so its next capture reads only what changes
// after.
//
// Nothing must write to dir meanwhile (the caller stops the chat's
// sandboxes first). A restore that fails (ctx ended, the disk is full)
// leaves dir partly restored: restore again, or restore a checkpoint taken
// before.
func (s *Store) Restore(ctx context.Context, user, chat, id, dir string) (*Restored, error) {
	start := time.Now()
	h, err := ParseHash(id)
	if err != nil {
		return nil, err
	}
	if err := checkID("chat", chat); err != nil {
		return nil, err
	}
	u, unlock, err := s.enter(ctx, user, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rd := u.reader()
	defer rd.close()
	cm, err := readCommit(rd, h)
	if err != nil {
		return nil, err
	}
	out := &Restored{Workspace: !cm.files.IsZero()}
	if out.Memory, err = readMemory(rd, cm.memory); err != nil {
		return nil, err
	}
	if !cm.history.IsZero() {
		typ, data, err := rd.read(cm.history, maxTree)
		if err != nil {
			return nil, err
		}
		if typ != typeHistory {
			return nil, fmt.Errorf("%w: history object %s", ErrCorrupt, cm.history)
		}
		out.History = data
	}
	if dir == "" {
		out.Duration = time.Since(start)
		return out, nil
	}
	r := &restorer{ctx: ctx, rd: rd, old: u.loadIndex(chat), idx: &index{base: h, files: map[string]indexEntry{}},
		root: os.Geteuid() == 0, out: out}
	top, err := openDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return nil, fmt.Errorf("restore: %w", err)
	}
	defer top.Close()
	if !cm.files.IsZero() {
		err = r.dir(top, "", cm.files)
	} else {
		err = r.clear(top)
	}
	if err != nil {
		// Half restored: the index no longer describes dir.
		_ = os.Remove(u.indexPath(chat))
		return nil, fmt.Errorf("restore checkpoint %s: %w", id, err)
	}
	if err := u.saveIndex(chat, r.idx); err != nil {
		s.log.Warn("checkpoint index not saved", "user", user, "chat", chat, "error", err)
	}
	out.Duration = time.Since(start)
	return out, nil
}

// State returns the hook memory and history of the user's checkpoint id
// (Restore without a folder).
func (s *Store) State(ctx context.Context, user, id string) (*Restored, error) {
	return s.Restore(ctx, user, "memory", id, "")
}

func readCommit(rd *reader, h Hash) (commit, error) {
	typ, data, err := rd.read(h, 4096)
	if err != nil {
		return commit{}, err
	}
	if typ != typeCommit {
		return commit{}, fmt.Errorf("%w: %s is no checkpoint", ErrNotFound, h)
	}
	return decodeCommit(data)
}

func readMemory(rd *reader, h Hash) (map[string]json.RawMessage, error) {
	mem := map[string]json.RawMessage{}
	if h.IsZero() {
		return mem, nil
	}
	typ, data, err := rd.read(h, maxTree)
	if err != nil {
		return nil, err
	}
	if typ != typeMemory {
		return nil, fmt.Errorf("%w: memory object %s", ErrCorrupt, h)
	}
	if err := json.Unmarshal(data, &mem); err != nil {
		return nil, fmt.Errorf("%w: memory object %s: %v", ErrCorrupt, h, err)
	}
	return mem, nil
}

func readTree(rd *reader, h Hash) ([]entry, error) {
	typ, data, err := rd.read(h, maxTree)
	if err != nil {
		return nil, err
	}
	if typ != typeTree {
		return nil, fmt.Errorf("%w: %s is no tree", ErrCorrupt, h)
	}
	return decodeTree(data)
}

// restorer is one restore.
type restorer struct {
	ctx      context.Context
	rd       *reader
	old, idx *index
	root     bool
	out      *Restored
}

// clear removes everything in the folder d.
func (r *restorer) clear(d *os.File) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := r.remove(int(d.Fd()), n); err != nil {
			return err
		}
	}
	return nil
}

// remove removes the entry name of dirfd, a folder with all it holds.
func (r *restorer) remove(dirfd int, name string) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		r.out.Removed++
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	sub, err := openDirAt(dirfd, name)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if !r.root {
		_ = unix.Fchmod(int(sub.Fd()), 0o700)
	}
	err = r.clear(sub)
	sub.Close()
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	r.out.Removed++
	return nil
}

// dir makes the folder d (rel is its path) hold tree h's entries.
func (r *restorer) dir(d *os.File, rel string, h Hash) error {
	want, err := readTree(r.rd, h)
	if err != nil {
		return err
	}
	fd := int(d.Fd())
	if !r.root {
		// Its owner may write into it whatever its mode; the mode is
		// set once its entries are.
		_ = unix.Fchmod(fd, 0o700)
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	keep := make(map[string]bool, len(want))
	for _, e := range want {
		keep[e.name] = true
	}
	for _, n := range names {
		if !keep[n] {
			if err := r.remove(fd, n); err != nil {
				return err
			}
		}
	}
	for _, e := range want {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		p := path.Join(rel, e.name)
		var st unix.Stat_t
		exists := true
		if err := unix.Fstatat(fd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("stat %s: %w", p, err)
			}
			exists = false
		}
		typ := st.Mode & unix.S_IFMT
		switch e.kind {
		case kindDir:
			if exists && typ != unix.S_IFDIR {
				if err := r.remove(fd, e.name); err != nil {
					return err
				}
				exists = false
			}
			if !exists {
				if err := unix.Mkdirat(fd, e.name, 0o700); err != nil {
					return fmt.Errorf("mkdir %s: %w", p, err)
				}
				r.out.Written++
			}
			sub, err := openDirAt(fd, e.name)
			if err != nil {
				return fmt.Errorf("open %s: %w", p, err)
			}
			err = r.dir(sub, p, e.hash)
			var now unix.Stat_t
			if err == nil && (unix.Fstat(int(sub.Fd()), &now) != nil || !r.attrsMatch(&now, e)) {
				err = r.setAttrs(int(sub.Fd()), e)
			}
			sub.Close()
			if err != nil {
				return err
			}
		case kindFile:
			if err := r.file(fd, p, e, exists, &st); err != nil {
				return err
			}
		case kindSymlink:
			if exists && typ == unix.S_IFLNK {
				if target, err := readlinkAt(fd, e.name); err == nil && target == e.link {
					continue
				}
			}
			if _, err := r.place(fd, e, exists && typ == unix.S_IFDIR, func(tmp string) error {
				if err := unix.Symlinkat(e.link, fd, tmp); err != nil {
					return err
				}
				if r.root {
					if err := unix.Fchownat(fd, tmp, int(e.uid), int(e.gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
						return err
					}
				}
				ts := []unix.Timespec{unix.NsecToTimespec(e.mtime), unix.NsecToTimespec(e.mtime)}
				return unix.UtimesNanoAt(fd, tmp, ts, unix.AT_SYMLINK_NOFOLLOW)
			}); err != nil {
				return fmt.Errorf("restore link %s: %w", p, err)
			}
		}
	}
	return nil
}

// file restores the regular file e of dirfd (p its path): kept when the
// one there is unchanged since the index recorded it with e's content,
// else written anew.
func (r *restorer) file(dirfd int, p string, e entry, exists bool, st *unix.Stat_t) error {
	r.out.Files++
	r.out.Bytes += e.size
	if exists && st.Mode&unix.S_IFMT == unix.S_IFREG {
		if ie, ok := r.old.files[p]; ok && ie.matches(st) && ie.hash == e.hash {
			fd, err := unix.Openat(dirfd, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err == nil {
				var now unix.Stat_t
				err = unix.Fstat(fd, &now)
				if err == nil && now.Ino == st.Ino {
					if !r.attrsMatch(&now, e) {
						if err = r.setAttrs(fd, e); err == nil {
							err = unix.Fstat(fd, &now)
						}
					}
					if err == nil {
						r.idx.files[p] = newIndexEntry(&now, e.hash)
						unix.Close(fd)
						return nil
					}
				}
				unix.Close(fd)
			}
			// Not what it seemed: written anew below.
		}
	}
	var ino uint64
	now, err := r.place(dirfd, e, exists && st.Mode&unix.S_IFMT == unix.S_IFDIR, func(tmp string) error {
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		defer f.Close()
		src, err := r.rd.open(e.hash)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, &ctxReader{ctx: r.ctx, r: src})
		if cerr := src.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		if err := r.setAttrs(fd, e); err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		ino = st.Ino
		return nil
	})
	if err != nil {
		return err
	}
	if now.Ino == ino {
		r.idx.files[p] = newIndexEntry(now, e.hash)
	}
	return nil
}

// place makes an entry with make at a new name of dirfd and renames it
// over e.name (a folder there is removed first: a rename cannot replace
// one). It returns the entry's stat once in place (a rename changes its
// change time).
func (r *restorer) place(dirfd int, e entry, dirThere bool, make func(tmp string) error) (*unix.Stat_t, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	tmp := ".agentbox-restore-" + hex.EncodeToString(b[:])
	if err := make(tmp); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	if dirThere {
		if err := r.remove(dirfd, e.name); err != nil {
			_ = unix.Unlinkat(dirfd, tmp, 0)
			return nil, err
		}
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, e.name); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	r.out.Written++
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("%s: %w", e.name, err)
	}
	return &st, nil
}

// setAttrs gives the open file or folder fd e's owner (as root), mode and
// modification time.
func (r *restorer) setAttrs(fd int, e entry) error {
	if r.root {
		if err := unix.Fchown(fd, int(e.uid), int(e.gid)); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, e.perm); err != nil {
		return err
	}
	return futimens(fd, e.mtime)
}

// attrsMatch reports whether st already has e's owner (when restored),
// mode and modification time.
func (r *restorer) attrsMatch(st *unix.Stat_t, e entry) bool {
	return st.Mode&0o1777 == e.perm && timespecNS(st.Mtim) == e.mtime && (!r.root || st.Uid == e.uid && st.Gid == e.gid)
}

// futimens sets the access and modification times of the open fd
// (utimensat with a NULL path, which every Linux takes; x/sys/unix has no
// wrapper for it).
func futimens(fd int, ns int64) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(ns), unix.NsecToTimespec(ns)}
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
