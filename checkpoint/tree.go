package checkpoint

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
)

// Entry kinds of a tree.
const (
	kindFile    byte = 'f'
	kindDir     byte = 'd'
	kindSymlink byte = 'l'
)

// entry is one name of a folder as a tree records it.
type entry struct {
	name  string
	kind  byte
	perm  uint32 // permission bits and sticky (never set-id bits)
	uid   uint32
	gid   uint32
	mtime int64 // nanoseconds since the epoch
	size  int64 // a file's length
	hash  Hash  // a file's blob, a folder's tree
	link  string
}

// treeVersion leads every encoded tree.
const treeVersion = 1

// encodeTree encodes entries (sorted by name here) as a tree object.
func encodeTree(entries []entry) []byte {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	b := make([]byte, 0, 16+len(entries)*80)
	b = binary.AppendUvarint(b, treeVersion)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = binary.AppendUvarint(b, uint64(len(e.name)))
		b = append(b, e.name...)
		b = append(b, e.kind)
		b = binary.AppendUvarint(b, uint64(e.perm))
		b = binary.AppendUvarint(b, uint64(e.uid))
		b = binary.AppendUvarint(b, uint64(e.gid))
		b = binary.AppendVarint(b, e.mtime)
		switch e.kind {
		case kindFile:
			b = binary.AppendUvarint(b, uint64(e.size))
			b = append(b, e.hash[:]...)
		case kindDir:
			b = append(b, e.hash[:]...)
		case kindSymlink:
			b = binary.AppendUvarint(b, uint64(len(e.link)))
			b = append(b, e.link...)
		}
	}
	return b
}

// maxName bounds a name or link target in a tree (Linux allows 255 and
// 4095 bytes).
const maxName = 4096

// decodeTree decodes a tree object, checking that its names are ones a
// folder can hold, sorted and unique.
func decodeTree(data []byte) ([]entry, error) {
	r := bytes.NewReader(data)
	bad := func(what string) ([]entry, error) {
		return nil, fmt.Errorf("%w: tree: %s", ErrCorrupt, what)
	}
	uv := func() (uint64, bool) {
		v, err := binary.ReadUvarint(r)
		return v, err == nil
	}
	str := func() (string, bool) {
		n, ok := uv()
		if !ok || n > maxName || n > uint64(r.Len()) {
			return "", false
		}
		b := make([]byte, n)
		_, _ = r.Read(b)
		return string(b), true
	}
	if v, ok := uv(); !ok || v != treeVersion {
		return bad("version")
	}
	n, ok := uv()
	if !ok || n > uint64(len(data)) {
		return bad("count")
	}
	out := make([]entry, 0, n)
	for i := uint64(0); i < n; i++ {
		var e entry
		if e.name, ok = str(); !ok || e.name == "" || e.name == "." || e.name == ".." || strings.ContainsAny(e.name, "/\x00") {
			return bad("name")
		}
		if len(out) > 0 && out[len(out)-1].name >= e.name {
			return bad("names not sorted")
		}
		k, err := r.ReadByte()
		if err != nil {
			return bad("kind")
		}
		e.kind = k
		perm, ok1 := uv()
		uid, ok2 := uv()
		gid, ok3 := uv()
		mtime, err := binary.ReadVarint(r)
		if !ok1 || !ok2 || !ok3 || err != nil || perm > 0o1777 || uid > 1<<32-1 || gid > 1<<32-1 {
			return bad("attributes")
		}
		e.perm, e.uid, e.gid, e.mtime = uint32(perm), uint32(uid), uint32(gid), mtime
		switch k {
		case kindFile:
			size, ok := uv()
			if !ok || size > 1<<62 {
				return bad("size")
			}
			e.size = int64(size)
			if _, err := r.Read(e.hash[:]); err != nil {
				return bad("hash")
			}
		case kindDir:
			if _, err := r.Read(e.hash[:]); err != nil {
				return bad("hash")
			}
		case kindSymlink:
			if e.link, ok = str(); !ok || e.link == "" || strings.IndexByte(e.link, 0) >= 0 {
				return bad("link")
			}
		default:
			return bad("kind")
		}
		out = append(out, e)
	}
	if r.Len() != 0 {
		return bad("trailing bytes")
	}
	return out, nil
}

// commit is a checkpoint: its files (a tree; zero for a chat without a
// workspace), its hook memory and its history (zero: none).
type commit struct {
	files   Hash
	memory  Hash
	history Hash
	// count and bytes describe the files: how many regular files, their
	// total length.
	count int64
	bytes int64
}

func encodeCommit(c commit) []byte {
	return fmt.Appendf(nil, "agentbox checkpoint 1\nfiles %s\nmemory %s\nhistory %s\ncount %d\nbytes %d\n", c.files, c.memory, c.history, c.count, c.bytes)
}

func decodeCommit(data []byte) (commit, error) {
	var c commit
	var files, memory, history string
	n, err := fmt.Sscanf(string(data), "agentbox checkpoint 1\nfiles %64s\nmemory %64s\nhistory %64s\ncount %d\nbytes %d\n", &files, &memory, &history, &c.count, &c.bytes)
	if err != nil || n != 5 {
		return c, fmt.Errorf("%w: commit", ErrCorrupt)
	}
	if c.files, err = ParseHash(files); err != nil {
		return c, fmt.Errorf("%w: commit", ErrCorrupt)
	}
	if c.memory, err = ParseHash(memory); err != nil {
		return c, fmt.Errorf("%w: commit", ErrCorrupt)
	}
	if c.history, err = ParseHash(history); err != nil {
		return c, fmt.Errorf("%w: commit", ErrCorrupt)
	}
	return c, nil
}
