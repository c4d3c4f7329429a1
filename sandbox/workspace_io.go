package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"syscall"
)

// DefaultReadLimit is what ReadFile returns at most when its caller gives
// no limit.
const DefaultReadLimit = 32 << 20

// ioChunk is how much one read or write system call moves between two
// checks of ctx.
const ioChunk = 1 << 20

// FileKind names the kind of a special file ("named pipe (FIFO)",
// "socket", "character device", ...), or returns "" for a regular file, a
// folder or a symlink.
func FileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeIrregular != 0:
		return "irregular file"
	}
	return ""
}

// SpecialFileError is the error for a special file: it names the
// operation, the path as the caller gave it, and the kind of file found
// there. It matches ErrSpecialFile with errors.Is.
type SpecialFileError struct {
	Op, Path string
	// Kind is FileKind's name for it: "named pipe (FIFO)", "socket", ...
	Kind string
}

func (e *SpecialFileError) Error() string {
	return fmt.Sprintf("%s %q: is a %s, not a regular file or folder", e.Op, e.Path, e.Kind)
}

// Unwrap returns ErrSpecialFile.
func (e *SpecialFileError) Unwrap() error { return ErrSpecialFile }

// special returns a *SpecialFileError unless m is a regular file or a
// folder.
func special(op, p string, m fs.FileMode) error {
	if m.IsRegular() || m.IsDir() {
		return nil
	}
	kind := FileKind(m)
	if kind == "" {
		kind = "special file"
	}
	return &SpecialFileError{Op: op, Path: p, Kind: kind}
}

// open opens the regular file or folder at p for reading. It looks at the
// entry first (a device's open may have effects of its own, a FIFO's
// blocks), opens it non-blocking, and checks the open handle again, since
// the agent may swap the entry in between.
func (w *Workspace) open(ctx context.Context, op, p string) (*os.File, fs.FileInfo, error) {
	rel, err := begin(ctx, op, p)
	if err != nil {
		return nil, nil, err
	}
	st, err := w.root.Stat(rel)
	if err != nil {
		return nil, nil, w.pathErr(op, p, err)
	}
	if err := special(op, p, st.Mode()); err != nil {
		return nil, nil, err
	}
	f, err := w.root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, w.pathErr(op, p, err)
	}
	st, err = f.Stat()
	if err == nil {
		err = special(op, p, st.Mode())
	} else {
		err = w.pathErr(op, p, err)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, st, nil
}

// Open opens the regular file or folder at p for reading, for callers
// that stream it (the files API). A special file is ErrSpecialFile; the
// caller closes the file. Reads of the returned file are not bounded by
// ctx, but they cannot block: it is a regular file or a folder.
func (w *Workspace) Open(ctx context.Context, p string) (*os.File, error) {
	f, _, err := w.open(ctx, "open", p)
	return f, err
}

// ReadFile returns the content of the regular file at p, at most limit
// bytes (0: DefaultReadLimit): a larger file is ErrFileTooLarge, a folder
// an error that says so, a special file ErrSpecialFile. It stops with
// ctx's error when ctx ends.
func (w *Workspace) ReadFile(ctx context.Context, p string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	f, st, err := w.open(ctx, "read", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.IsDir() {
		return nil, fmt.Errorf("read %q: is a folder (list it instead): %w", p, syscall.EISDIR)
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("read %q: %d bytes is over the limit of %d: %w", p, st.Size(), limit, ErrFileTooLarge)
	}
	// The file may grow while it is read: stop once it is over limit.
	buf := make([]byte, 0, min(st.Size(), limit)+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read %q: %w", p, err)
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), ioChunk))
		}
		n, err := f.Read(buf[len(buf):min(cap(buf), len(buf)+ioChunk)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, fmt.Errorf("read %q: grew over the limit of %d bytes: %w", p, limit, ErrFileTooLarge)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, w.pathErr("read", p, err)
		}
	}
}

// WriteFile writes data to p atomically: WriteFrom with data.
func (w *Workspace) WriteFile(ctx context.Context, p string, data []byte, perm fs.FileMode) error {
	_, err := w.WriteFrom(ctx, p, bytes.NewReader(data), perm)
	return err
}

// writeBuffer is what WriteFrom holds of its reader at once.
const writeBuffer = 256 << 10

// WriteFrom writes what r yields, to its end, to p atomically (a new
// temporary file renamed over the target), creating missing parent
// folders, and returns how many bytes it wrote. It holds at most
// writeBuffer bytes of r at once, so a caller streams a file of any size
// through it (the files API's uploads). It never opens what is at p, so a
// FIFO or device the agent planted there is replaced, not written to; a
// symlink at p is replaced too, never followed. ctx is checked between
// chunks; when it ends, or r fails (the error is returned, wrapped), the
// temporary file is removed and p is left as it was. A full workspace is
// ErrDiskFull.
func (w *Workspace) WriteFrom(ctx context.Context, p string, r io.Reader, perm fs.FileMode) (int64, error) {
	rel, err := begin(ctx, "write", p)
	if err != nil {
		return 0, err
	}
	if rel == "." {
		return 0, fmt.Errorf("write %q: is the workspace root", p)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := w.MkdirAll(ctx, dir); err != nil {
			return 0, err
		}
	}
	if perm == 0 {
		perm = 0o644
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := path.Join(path.Dir(rel), "."+path.Base(rel)+".tmp-"+hex.EncodeToString(suffix[:]))
	// O_EXCL: a new regular file, never something planted under this name.
	f, err := w.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return 0, w.pathErr("write", p, err)
	}
	var n int64
	var werr, rerr error
	buf := make([]byte, writeBuffer)
	for werr == nil && rerr == nil {
		if werr = ctx.Err(); werr != nil {
			break
		}
		var m int
		m, rerr = io.ReadFull(r, buf)
		if m > 0 {
			_, werr = f.Write(buf[:m])
			n += int64(m)
		}
	}
	if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
		rerr = nil
	}
	if werr == nil && rerr == nil && w.uid >= 0 {
		werr = f.Chown(w.uid, w.gid)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && rerr == nil {
		werr = w.root.Rename(tmp, rel)
	}
	if werr != nil || rerr != nil {
		_ = w.root.Remove(tmp)
		switch {
		case rerr != nil:
			return 0, fmt.Errorf("write %q: read: %w", p, rerr)
		case errors.Is(werr, context.Canceled) || errors.Is(werr, context.DeadlineExceeded):
			return 0, fmt.Errorf("write %q: %w", p, werr)
		}
		return 0, w.pathErr("write", p, werr)
	}
	return n, nil
}

// ListDir lists the folder at p, sorted by name. Entries of any kind are
// listed (a FIFO shows as a file of size 0; its FileInfo.Mode says what it
// is); p itself must be a folder: a special file is ErrSpecialFile. It
// stops with ctx's error when ctx ends.
func (w *Workspace) ListDir(ctx context.Context, p string) ([]FileInfo, error) {
	f, st, err := w.open(ctx, "list", p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if !st.IsDir() {
		return nil, fmt.Errorf("list %q: %w", p, syscall.ENOTDIR)
	}
	var out []FileInfo
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list %q: %w", p, err)
		}
		entries, err := f.ReadDir(1024)
		for _, e := range entries {
			st, err := e.Info() // an lstat: never opens the entry
			if err != nil {
				continue // removed while listing
			}
			out = append(out, toInfo(st))
		}
		if errors.Is(err, io.EOF) || len(entries) == 0 && err == nil {
			break
		}
		if err != nil {
			return nil, w.pathErr("list", p, err)
		}
	}
	if out == nil {
		out = []FileInfo{}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
