package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// An object as stored: a header of two bytes, its type and its encoding,
// then its bytes, raw or as one zstd frame. Objects smaller than
// looseThreshold go into packs, one pack per capture; larger ones are
// files of their own, objects/ab/cdef..., written as they are read.
const (
	encRaw  byte = 0
	encZstd byte = 1

	looseThreshold = 128 << 10
	// minCompress: smaller objects are stored raw (a frame's overhead
	// eats what it would save).
	minCompress = 64
)

// Pack files: packMagic, then the objects' records back to back, then the
// index (per object: hash, offset, length), then the trailer: the index's
// offset and the object count (8 and 4 bytes, big-endian) and
// packTrailerMagic.
var (
	packMagic        = []byte("ABPK\x01")
	packTrailerMagic = []byte("ABPX")
)

const (
	packEntrySize   = 32 + 8 + 4
	packTrailerSize = 8 + 4 + 4
	// maxPackObjects bounds what a pack's trailer may claim (a corrupt
	// one must not make Go allocate gigabytes).
	maxPackObjects = 1 << 26
)

var (
	zEnc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	zDec, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<30))
	// Streaming coders for large objects, reset per use.
	zWriters = sync.Pool{New: func() any {
		w, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		return w
	}}
	zReaders = sync.Pool{New: func() any {
		r, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		return r
	}}
)

// encode returns the stored record of an object of type typ: compressed
// when that saves at least a sixteenth.
func encode(typ byte, data []byte) []byte {
	if len(data) >= minCompress {
		out := zEnc.EncodeAll(data, append(make([]byte, 0, len(data)/2+16), typ, encZstd))
		if len(out)-2 < len(data)-len(data)/16 {
			return out
		}
	}
	out := make([]byte, 0, len(data)+2)
	return append(append(out, typ, encRaw), data...)
}

// decode returns the type and bytes of a stored record.
func decode(rec []byte) (byte, []byte, error) {
	if len(rec) < 2 {
		return 0, nil, fmt.Errorf("%w: object record of %d bytes", ErrCorrupt, len(rec))
	}
	switch rec[1] {
	case encRaw:
		return rec[0], rec[2:], nil
	case encZstd:
		out, err := zDec.DecodeAll(rec[2:], nil)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
		return rec[0], out, nil
	}
	return 0, nil, fmt.Errorf("%w: object encoding %d", ErrCorrupt, rec[1])
}

// userStore is one user's objects: packs and loose objects, with an index
// of the packs' objects in memory (refreshed from the folder under the
// user's lock, so it sees what other processes wrote and removed).
type userStore struct {
	dir string
	log *slog.Logger

	mu    sync.Mutex
	packs map[string]*packInfo // by file name
	objs  map[Hash]loc
}

// packInfo is one pack file.
type packInfo struct {
	name    string
	size    int64
	objects int
}

// loc is where an object is in a pack.
type loc struct {
	pack *packInfo
	off  int64
	n    uint32
}

func (u *userStore) name() string { return filepath.Base(u.dir) }

func (u *userStore) path(elem ...string) string {
	return filepath.Join(append([]string{u.dir}, elem...)...)
}

func (u *userStore) loosePath(h Hash) string {
	s := h.String()
	return u.path(dirObjects, s[:2], s[2:])
}

// refresh reads the packs folder: the indexes of packs it does not know
// yet are loaded, packs that are gone are forgotten. Callers hold the
// user's lock (shared at least), so no pack it lists is removed while they
// rely on it.
func (u *userStore) refresh() error {
	ents, err := os.ReadDir(u.path(dirPacks))
	if err != nil {
		return fmt.Errorf("checkpoint packs: %w", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.packs == nil {
		u.packs, u.objs = map[string]*packInfo{}, map[Hash]loc{}
	}
	present := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".pack") || !e.Type().IsRegular() {
			continue
		}
		present[name] = true
		if _, ok := u.packs[name]; ok {
			continue
		}
		p, entries, err := readPackIndex(u.path(dirPacks, name))
		if err != nil {
			// A pack that cannot be read is left alone (and its objects
			// count as missing): a capture writes them again.
			u.log.Error("checkpoint pack unreadable", "user", u.name(), "pack", name, "error", err)
			continue
		}
		u.packs[name] = p
		for _, e := range entries {
			u.objs[e.hash] = loc{pack: p, off: e.off, n: e.n}
		}
	}
	for name, p := range u.packs {
		if present[name] {
			continue
		}
		delete(u.packs, name)
		for h, l := range u.objs {
			if l.pack == p {
				delete(u.objs, h)
			}
		}
	}
	return nil
}

type packEntry struct {
	hash Hash
	off  int64
	n    uint32
}

// readPackIndex reads a pack's trailer and index.
func readPackIndex(p string) (*packInfo, []packEntry, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size < int64(len(packMagic))+packTrailerSize {
		return nil, nil, fmt.Errorf("%w: pack of %d bytes", ErrCorrupt, size)
	}
	var tr [packTrailerSize]byte
	if _, err := f.ReadAt(tr[:], size-packTrailerSize); err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(tr[12:], packTrailerMagic) {
		return nil, nil, fmt.Errorf("%w: pack trailer", ErrCorrupt)
	}
	idxOff := int64(binary.BigEndian.Uint64(tr[0:8]))
	count := int64(binary.BigEndian.Uint32(tr[8:12]))
	if count > maxPackObjects || idxOff < int64(len(packMagic)) || idxOff+count*packEntrySize != size-packTrailerSize {
		return nil, nil, fmt.Errorf("%w: pack index bounds", ErrCorrupt)
	}
	buf := make([]byte, count*packEntrySize)
	if _, err := f.ReadAt(buf, idxOff); err != nil {
		return nil, nil, err
	}
	entries := make([]packEntry, count)
	for i := range entries {
		b := buf[i*packEntrySize:]
		copy(entries[i].hash[:], b[:32])
		entries[i].off = int64(binary.BigEndian.Uint64(b[32:40]))
		entries[i].n = binary.BigEndian.Uint32(b[40:44])
		if entries[i].off < int64(len(packMagic)) || entries[i].off+int64(entries[i].n) > idxOff {
			return nil, nil, fmt.Errorf("%w: pack entry %d out of bounds", ErrCorrupt, i)
		}
	}
	return &packInfo{name: filepath.Base(p), size: size, objects: int(count)}, entries, nil
}

// lookup returns where object h is in a pack.
func (u *userStore) lookup(h Hash) (loc, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	l, ok := u.objs[h]
	return l, ok
}

// has reports whether object h is stored, in a pack or loose.
func (u *userStore) has(h Hash) bool {
	if _, ok := u.lookup(h); ok {
		return true
	}
	_, err := os.Lstat(u.loosePath(h))
	return err == nil
}

// reader reads objects for one operation, keeping the packs it opened
// open until close.
type reader struct {
	u     *userStore
	files map[string]*os.File
}

func (u *userStore) reader() *reader { return &reader{u: u, files: map[string]*os.File{}} }

func (r *reader) close() {
	for _, f := range r.files {
		f.Close()
	}
}

func (r *reader) pack(p *packInfo) (*os.File, error) {
	if f, ok := r.files[p.name]; ok {
		return f, nil
	}
	f, err := os.Open(r.u.path(dirPacks, p.name))
	if err != nil {
		return nil, err
	}
	r.files[p.name] = f
	return f, nil
}

// read returns object h's type and bytes, checked against its hash.
// limit bounds what a loose object may hold (trees and memory are read
// whole; file contents go through open).
func (r *reader) read(h Hash, limit int64) (byte, []byte, error) {
	var rec []byte
	if l, ok := r.u.lookup(h); ok {
		f, err := r.pack(l.pack)
		if err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", h, err)
		}
		rec = make([]byte, l.n)
		if _, err := f.ReadAt(rec, l.off); err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", h, err)
		}
	} else {
		f, err := os.Open(r.u.loosePath(h))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil, fmt.Errorf("object %s: %w", h, ErrNotFound)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", h, err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Size() > limit+2 {
			return 0, nil, fmt.Errorf("object %s: %w: %d bytes, more than expected", h, ErrCorrupt, st.Size())
		}
		if rec, err = io.ReadAll(f); err != nil {
			return 0, nil, fmt.Errorf("object %s: %w", h, err)
		}
	}
	typ, data, err := decode(rec)
	if err != nil {
		return 0, nil, fmt.Errorf("object %s: %w", h, err)
	}
	if hashOf(typ, data) != h {
		return 0, nil, fmt.Errorf("object %s: %w: its content does not match its name", h, ErrCorrupt)
	}
	return typ, data, nil
}

// open returns a reader of blob h's content. The content is checked
// against the hash as it is read: Close reports a mismatch.
func (r *reader) open(h Hash) (io.ReadCloser, error) {
	if _, ok := r.u.lookup(h); ok {
		typ, data, err := r.read(h, looseThreshold)
		if err != nil {
			return nil, err
		}
		if typ != typeBlob {
			return nil, fmt.Errorf("object %s: %w: not a file's content", h, ErrCorrupt)
		}
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	f, err := os.Open(r.u.loosePath(h))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("object %s: %w", h, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", h, err)
	}
	br := bufio.NewReaderSize(f, 256<<10)
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("object %s: %w: %v", h, ErrCorrupt, err)
	}
	if hdr[0] != typeBlob {
		f.Close()
		return nil, fmt.Errorf("object %s: %w: not a file's content", h, ErrCorrupt)
	}
	sum := sha256.New()
	sum.Write([]byte{typeBlob})
	vr := &verifier{h: h, sum: sum, f: f}
	switch hdr[1] {
	case encRaw:
		vr.r = br
	case encZstd:
		zr := zReaders.Get().(*zstd.Decoder)
		if err := zr.Reset(br); err != nil {
			zReaders.Put(zr)
			f.Close()
			return nil, fmt.Errorf("object %s: %w: %v", h, ErrCorrupt, err)
		}
		vr.r, vr.zr = zr, zr
	default:
		f.Close()
		return nil, fmt.Errorf("object %s: %w: encoding %d", h, ErrCorrupt, hdr[1])
	}
	return vr, nil
}

// verifier hashes what it reads; Close fails when the content read does
// not match the object's name (read to EOF first).
type verifier struct {
	h   Hash
	r   io.Reader
	zr  *zstd.Decoder
	sum hash.Hash
	f   *os.File
	eof bool
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.sum.Write(p[:n])
	if err == io.EOF {
		v.eof = true
	}
	return n, err
}

func (v *verifier) Close() error {
	if v.zr != nil {
		_ = v.zr.Reset(nil)
		zReaders.Put(v.zr)
		v.zr = nil
	}
	err := v.f.Close()
	var got Hash
	v.sum.Sum(got[:0])
	if v.eof && got != v.h {
		return fmt.Errorf("object %s: %w: its content does not match its name", v.h, ErrCorrupt)
	}
	return err
}

// size returns what object h takes in the store (its record's length, or
// its loose file's size), and whether it is there.
func (u *userStore) size(h Hash) (int64, bool) {
	if l, ok := u.lookup(h); ok {
		return int64(l.n), true
	}
	st, err := os.Lstat(u.loosePath(h))
	if err != nil {
		return 0, false
	}
	return st.Size(), true
}

// tempFile creates a file in the user's tmp folder.
func (u *userStore) tempFile(prefix string) (*os.File, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return os.OpenFile(u.path(dirTmp, prefix+hex.EncodeToString(b[:])), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
}

// placeLoose moves the finished temporary file tmp (fsynced) to object
// h's loose path. An object already there wins: it has the same content.
func (u *userStore) placeLoose(tmp string, h Hash) error {
	dst := u.loosePath(h)
	if err := os.Mkdir(filepath.Dir(dst), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if _, err := os.Lstat(dst); err == nil {
		return os.Remove(tmp)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writer stores the new objects of one operation: small ones into one
// pack, finished by finish, large ones loose at once. Objects already
// stored are skipped.
type writer struct {
	u     *userStore
	f     *os.File // the pack being written (nil: none yet)
	bw    *bufio.Writer
	off   int64
	index []packEntry
	seen  map[Hash]bool
	// added is what the operation stored, in bytes.
	added int64
}

func (u *userStore) writer() *writer { return &writer{u: u, seen: map[Hash]bool{}} }

// put stores an object held in memory and returns its hash.
func (w *writer) put(typ byte, data []byte) (Hash, error) {
	h := hashOf(typ, data)
	if w.seen[h] || w.u.has(h) {
		return h, nil
	}
	rec := encode(typ, data)
	if len(data) >= looseThreshold {
		if err := w.putLoose(h, rec); err != nil {
			return h, err
		}
	} else if err := w.putPacked(h, rec); err != nil {
		return h, err
	}
	w.seen[h] = true
	w.added += int64(len(rec))
	return h, nil
}

func (w *writer) putLoose(h Hash, rec []byte) error {
	f, err := w.u.tempFile("obj-")
	if err != nil {
		return err
	}
	_, err = f.Write(rec)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = w.u.placeLoose(f.Name(), h)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store object: %w", err)
	}
	return nil
}

func (w *writer) putPacked(h Hash, rec []byte) error {
	if w.f == nil {
		f, err := w.u.tempFile("pack-")
		if err != nil {
			return fmt.Errorf("store object: %w", err)
		}
		w.f, w.bw = f, bufio.NewWriterSize(f, 256<<10)
		if _, err := w.bw.Write(packMagic); err != nil {
			return fmt.Errorf("store object: %w", err)
		}
		w.off = int64(len(packMagic))
	}
	if _, err := w.bw.Write(rec); err != nil {
		return fmt.Errorf("store object: %w", err)
	}
	w.index = append(w.index, packEntry{hash: h, off: w.off, n: uint32(len(rec))})
	w.off += int64(len(rec))
	return nil
}

// putStream stores a file's content read from r as a loose object, and
// returns its hash and length. first is what was read of it already.
func (w *writer) putStream(first []byte, r io.Reader) (Hash, int64, error) {
	f, err := w.u.tempFile("obj-")
	if err != nil {
		return Hash{}, 0, fmt.Errorf("store object: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	sum := sha256.New()
	sum.Write([]byte{typeBlob})
	bw := bufio.NewWriterSize(f, 256<<10)
	// Stored raw when its start does not compress (media, archives).
	enc := encRaw
	if c := zEnc.EncodeAll(first, nil); len(c) < len(first)-len(first)/16 {
		enc = encZstd
	}
	if _, err := bw.Write([]byte{typeBlob, enc}); err != nil {
		return Hash{}, 0, fmt.Errorf("store object: %w", err)
	}
	var dst io.Writer = bw
	var zw *zstd.Encoder
	if enc == encZstd {
		zw = zWriters.Get().(*zstd.Encoder)
		zw.Reset(bw)
		defer func() { zw.Reset(nil); zWriters.Put(zw) }()
		dst = zw
	}
	n, err := io.Copy(io.MultiWriter(dst, sum), io.MultiReader(bytes.NewReader(first), r))
	if err != nil {
		return Hash{}, 0, fmt.Errorf("read file: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return Hash{}, 0, fmt.Errorf("store object: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return Hash{}, 0, fmt.Errorf("store object: %w", err)
	}
	var h Hash
	sum.Sum(h[:0])
	if w.seen[h] || w.u.has(h) {
		return h, n, nil
	}
	st, err := f.Stat()
	if err != nil {
		return h, n, fmt.Errorf("store object: %w", err)
	}
	if err := f.Sync(); err != nil {
		return h, n, fmt.Errorf("store object: %w", err)
	}
	if err := f.Close(); err != nil {
		return h, n, fmt.Errorf("store object: %w", err)
	}
	ok = true
	if err := w.u.placeLoose(f.Name(), h); err != nil {
		os.Remove(f.Name())
		return h, n, fmt.Errorf("store object: %w", err)
	}
	w.seen[h] = true
	w.added += st.Size()
	return h, n, nil
}

// finish completes the pack (index, trailer, fsync) and puts it in place,
// where every reader finds it. Nothing is left of an unfinished writer
// after abort.
func (w *writer) finish() error {
	if w.f == nil {
		return nil
	}
	f := w.f
	w.f = nil
	fail := func(err error) error {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("store pack: %w", err)
	}
	idxOff := w.off
	var b [packEntrySize]byte
	for _, e := range w.index {
		copy(b[:32], e.hash[:])
		binary.BigEndian.PutUint64(b[32:40], uint64(e.off))
		binary.BigEndian.PutUint32(b[40:44], e.n)
		if _, err := w.bw.Write(b[:]); err != nil {
			return fail(err)
		}
	}
	var tr [packTrailerSize]byte
	binary.BigEndian.PutUint64(tr[0:8], uint64(idxOff))
	binary.BigEndian.PutUint32(tr[8:12], uint32(len(w.index)))
	copy(tr[12:], packTrailerMagic)
	if _, err := w.bw.Write(tr[:]); err != nil {
		return fail(err)
	}
	if err := w.bw.Flush(); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	var rb [8]byte
	_, _ = rand.Read(rb[:])
	name := hex.EncodeToString(rb[:]) + ".pack"
	dst := w.u.path(dirPacks, name)
	if err := os.Rename(f.Name(), dst); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("store pack: %w", err)
	}
	if err := syncDir(w.u.path(dirPacks)); err != nil {
		return fmt.Errorf("store pack: %w", err)
	}
	w.added += int64(len(packMagic)) + int64(len(w.index))*packEntrySize + packTrailerSize
	p := &packInfo{name: name, size: idxOff + int64(len(w.index))*packEntrySize + packTrailerSize, objects: len(w.index)}
	w.u.mu.Lock()
	if w.u.packs != nil {
		w.u.packs[name] = p
		for _, e := range w.index {
			w.u.objs[e.hash] = loc{pack: p, off: e.off, n: e.n}
		}
	}
	w.u.mu.Unlock()
	return nil
}

// abort drops an unfinished pack.
func (w *writer) abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}
