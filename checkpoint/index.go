package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// index is a chat's stat cache: for each file of its workspace as the last
// capture or restore left it, the stat that tells it is unchanged and its
// content's hash. base is that checkpoint: Collect keeps what it refers to,
// so every hash here stays stored.
type index struct {
	base  Hash
	files map[string]indexEntry
}

type indexEntry struct {
	ino   uint64
	size  int64
	mtime int64
	ctime int64
	mode  uint32
	// racy: the file changed so shortly before the capture that a later
	// write may not change its times; it is read again next time.
	racy bool
	hash Hash
}

// matches reports whether st is the stat the entry was taken from.
func (e indexEntry) matches(st *unix.Stat_t) bool {
	return !e.racy && e.ino == st.Ino && e.size == st.Size && e.mtime == timespecNS(st.Mtim) &&
		e.ctime == timespecNS(st.Ctim) && e.mode == st.Mode
}

func newIndexEntry(st *unix.Stat_t, h Hash) indexEntry {
	return indexEntry{ino: st.Ino, size: st.Size, mtime: timespecNS(st.Mtim), ctime: timespecNS(st.Ctim), mode: st.Mode, hash: h}
}

func timespecNS(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

var indexMagic = []byte("ABIX\x01")

func (u *userStore) indexPath(chat string) string { return u.path(dirIndex, chat) }

// loadIndex reads the chat's index; a missing or unreadable one is empty
// (the capture then reads every file).
func (u *userStore) loadIndex(chat string) *index {
	idx := &index{files: map[string]indexEntry{}}
	raw, err := os.ReadFile(u.indexPath(chat))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			u.log.Warn("checkpoint index unreadable; files are read again", "user", u.name(), "chat", chat, "error", err)
		}
		return idx
	}
	if err := idx.decode(raw); err != nil {
		u.log.Warn("checkpoint index unreadable; files are read again", "user", u.name(), "chat", chat, "error", err)
		return &index{files: map[string]indexEntry{}}
	}
	return idx
}

func (idx *index) decode(raw []byte) error {
	if !bytes.HasPrefix(raw, indexMagic) || len(raw) < len(indexMagic)+32 {
		return fmt.Errorf("%w: index header", ErrCorrupt)
	}
	copy(idx.base[:], raw[len(indexMagic):])
	data, err := zDec.DecodeAll(raw[len(indexMagic)+32:], nil)
	if err != nil {
		return fmt.Errorf("%w: index: %v", ErrCorrupt, err)
	}
	r := bytes.NewReader(data)
	n, err := binary.ReadUvarint(r)
	if err != nil || n > uint64(len(data)) {
		return fmt.Errorf("%w: index count", ErrCorrupt)
	}
	for i := uint64(0); i < n; i++ {
		l, err := binary.ReadUvarint(r)
		if err != nil || l > uint64(r.Len()) {
			return fmt.Errorf("%w: index path", ErrCorrupt)
		}
		p := make([]byte, l)
		_, _ = r.Read(p)
		var e indexEntry
		vals := []*int64{&e.size, &e.mtime, &e.ctime}
		ino, err1 := binary.ReadUvarint(r)
		var err2 error
		for _, v := range vals {
			if *v, err2 = binary.ReadVarint(r); err2 != nil {
				break
			}
		}
		mode, err3 := binary.ReadUvarint(r)
		racy, err4 := r.ReadByte()
		_, err5 := r.Read(e.hash[:])
		if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
			return fmt.Errorf("%w: index entry", ErrCorrupt)
		}
		e.ino, e.mode, e.racy = ino, uint32(mode), racy == 1
		idx.files[string(p)] = e
	}
	return nil
}

func (idx *index) encode() []byte {
	b := make([]byte, 0, 16+len(idx.files)*72)
	b = binary.AppendUvarint(b, uint64(len(idx.files)))
	for p, e := range idx.files {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, e.ino)
		b = binary.AppendVarint(b, e.size)
		b = binary.AppendVarint(b, e.mtime)
		b = binary.AppendVarint(b, e.ctime)
		b = binary.AppendUvarint(b, uint64(e.mode))
		if e.racy {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = append(b, e.hash[:]...)
	}
	// The base stays readable without decoding the rest (indexBases).
	return zEnc.EncodeAll(b, append(append([]byte(nil), indexMagic...), idx.base[:]...))
}

// saveIndex replaces the chat's index with idx.
func (u *userStore) saveIndex(chat string, idx *index) error {
	f, err := u.tempFile("index-")
	if err != nil {
		return fmt.Errorf("checkpoint index: %w", err)
	}
	_, err = f.Write(idx.encode())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), u.indexPath(chat))
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("checkpoint index: %w", err)
	}
	return nil
}

// indexBases returns the base checkpoint of every chat's index of the
// user: roots Collect keeps.
func (u *userStore) indexBases() ([]Hash, error) {
	ents, err := os.ReadDir(u.path(dirIndex))
	if err != nil {
		return nil, err
	}
	var out []Hash
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		f, err := os.Open(u.path(dirIndex, e.Name()))
		if err != nil {
			continue
		}
		head := make([]byte, len(indexMagic)+32)
		_, err = io.ReadFull(f, head)
		f.Close()
		if err != nil || !bytes.HasPrefix(head, indexMagic) {
			continue
		}
		var base Hash
		copy(base[:], head[len(indexMagic):])
		if !base.IsZero() {
			out = append(out, base)
		}
	}
	return out, nil
}
