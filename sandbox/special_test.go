package sandbox

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// specialFixture is a workspace where the agent planted a FIFO, a Unix
// socket, a symlink to the FIFO, and a FIFO where a folder is expected.
func specialFixture(t *testing.T) *Workspace {
	t.Helper()
	ws, err := OpenWorkspace(filepath.Join(t.TempDir(), "ws"), -1, -1)
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	d := ws.Dir()
	must(t, syscall.Mkfifo(filepath.Join(d, "notes.txt"), 0o644))
	must(t, os.MkdirAll(filepath.Join(d, "sub"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(d, "sub", "fifo"), 0o644))
	must(t, syscall.Mkfifo(filepath.Join(d, "dirfifo"), 0o644))
	must(t, os.Symlink("notes.txt", filepath.Join(d, "link-to-fifo")))
	l, err := net.Listen("unix", filepath.Join(d, "sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	return ws
}

// TestSpecialFilesRefused: reads, listings and opens of a FIFO, a socket
// or a symlink to a FIFO fail at once with ErrSpecialFile naming the path
// and its kind, where os.Root.ReadFile would block forever on the FIFO.
func TestSpecialFilesRefused(t *testing.T) {
	ws := specialFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct{ path, kind string }{
		{"notes.txt", "named pipe (FIFO)"},
		{"/workspace/notes.txt", "named pipe (FIFO)"},
		{"sub/fifo", "named pipe (FIFO)"},
		{"link-to-fifo", "named pipe (FIFO)"},
		{"sock", "socket"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			start := time.Now()
			_, err := ws.ReadFile(ctx, tc.path, 0)
			checkSpecial(t, "ReadFile", tc.path, tc.kind, err)
			_, err = ws.ListDir(ctx, tc.path)
			checkSpecial(t, "ListDir", tc.path, tc.kind, err)
			f, err := ws.Open(ctx, tc.path)
			if f != nil {
				f.Close()
			}
			checkSpecial(t, "Open", tc.path, tc.kind, err)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("took %s", d)
			}
			st, err := ws.Stat(ctx, tc.path)
			if err != nil || FileKind(st.Mode) != tc.kind {
				t.Errorf("Stat = %+v, %v; want its kind %q described", st, err, tc.kind)
			}
		})
	}
	// A FIFO where a folder is expected.
	if _, err := ws.ListDir(ctx, "dirfifo"); !errors.Is(err, ErrSpecialFile) {
		t.Errorf("ListDir(dirfifo) = %v", err)
	}
	if err := ws.MkdirAll(ctx, "dirfifo/x"); err == nil {
		t.Error("MkdirAll under a FIFO: no error")
	}
	// The listing itself shows them, with their kind in Mode.
	list, err := ws.ListDir(ctx, ".")
	must(t, err)
	kinds := map[string]string{}
	for _, e := range list {
		kinds[e.Name] = FileKind(e.Mode)
	}
	if kinds["notes.txt"] != "named pipe (FIFO)" || kinds["sock"] != "socket" {
		t.Errorf("listing kinds = %v", kinds)
	}
}

func checkSpecial(t *testing.T, op, p, kind string, err error) {
	t.Helper()
	var sfe *SpecialFileError
	switch {
	case !errors.Is(err, ErrSpecialFile):
		t.Errorf("%s(%q) = %v, want ErrSpecialFile", op, p, err)
	case !errors.As(err, &sfe) || sfe.Kind != kind || sfe.Path != p:
		t.Errorf("%s(%q) = %#v, want kind %q and the path", op, p, sfe, kind)
	case !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), p):
		t.Errorf("%s(%q): message %q names neither the path nor the kind", op, p, err)
	}
}

// TestWriteReplacesSpecialFiles: a write to a path holding a FIFO (with
// or without a reader), a socket or a symlink to a FIFO replaces the entry
// with a regular file; it never opens it, so it neither blocks (a FIFO
// without reader) nor feeds the agent's reader.
func TestWriteReplacesSpecialFiles(t *testing.T) {
	ws := specialFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A reader on sub/fifo, as the agent would hold one: O_NONBLOCK so the
	// test's own open does not wait for a writer.
	rd, err := os.OpenFile(filepath.Join(ws.Dir(), "sub", "fifo"), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	must(t, err)
	defer rd.Close()
	for _, p := range []string{"notes.txt", "sub/fifo", "sock", "link-to-fifo"} {
		must(t, ws.WriteFile(ctx, p, []byte("replaced "+p), 0))
		b, err := ws.ReadFile(ctx, p, 0)
		if err != nil || string(b) != "replaced "+p {
			t.Errorf("%s after the write: %q, %v", p, b, err)
		}
		st, err := os.Lstat(filepath.Join(ws.Dir(), p))
		if err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s is %v after the write, want a regular file", p, st.Mode())
		}
	}
	var buf [64]byte
	if n, _ := rd.Read(buf[:]); n != 0 {
		t.Errorf("the agent's reader got %q", buf[:n])
	}
}

// TestFileOpsEndWithCtx: every operation refuses to start once ctx has
// ended, and a long read or write stops between chunks.
func TestFileOpsEndWithCtx(t *testing.T) {
	t.Parallel()
	ws, err := OpenWorkspace(filepath.Join(t.TempDir(), "ws"), -1, -1)
	must(t, err)
	defer ws.Close()
	must(t, ws.WriteFile(context.Background(), "f", []byte("x"), 0))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, op := range map[string]func() error{
		"ReadFile":  func() error { _, err := ws.ReadFile(ctx, "f", 0); return err },
		"WriteFile": func() error { return ws.WriteFile(ctx, "g", []byte("x"), 0) },
		"ListDir":   func() error { _, err := ws.ListDir(ctx, "."); return err },
		"Stat":      func() error { _, err := ws.Stat(ctx, "f"); return err },
		"Lstat":     func() error { _, err := ws.Lstat(ctx, "f"); return err },
		"MkdirAll":  func() error { return ws.MkdirAll(ctx, "d") },
		"RemoveAll": func() error { return ws.RemoveAll(ctx, "f") },
		"Chmod":     func() error { return ws.Chmod(ctx, "f", 0o600) },
		"Open":      func() error { _, err := ws.Open(ctx, "f"); return err },
	} {
		if err := op(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with an ended ctx = %v, want context.Canceled", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws.Dir(), "g")); err == nil {
		t.Error("a canceled write left its file")
	}
	// A write canceled between chunks leaves neither the file nor its
	// temporary.
	dctx, dcancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer dcancel()
	<-dctx.Done()
	if err := ws.WriteFile(dctx, "big", make([]byte, 8*ioChunk), 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("write past the deadline = %v", err)
	}
	list, _ := ws.ListDir(context.Background(), ".")
	for _, e := range list {
		if e.Name != "f" {
			t.Errorf("left behind: %s", e.Name)
		}
	}
}

// TestReadFileLimit: the limit holds for a file that is larger, and for
// one that grows while it is read; the error says so.
func TestReadFileLimit(t *testing.T) {
	t.Parallel()
	ws, err := OpenWorkspace(filepath.Join(t.TempDir(), "ws"), -1, -1)
	must(t, err)
	defer ws.Close()
	ctx := context.Background()
	must(t, ws.WriteFile(ctx, "big", bytes.Repeat([]byte("x"), 3*ioChunk+5), 0))
	if b, err := ws.ReadFile(ctx, "big", 0); err != nil || len(b) != 3*ioChunk+5 {
		t.Errorf("read of %d bytes: %d, %v", 3*ioChunk+5, len(b), err)
	}
	_, err = ws.ReadFile(ctx, "big", ioChunk)
	if !errors.Is(err, ErrFileTooLarge) || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ws.ReadFile(ctx, ".", 0); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("read of a folder: %v", err)
	}
	if b, err := ws.ReadFile(ctx, "empty-missing", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing: %q, %v", b, err)
	}
}

// TestWriteFileDiskFull: ENOSPC from the filesystem is ErrDiskFull.
func TestWriteFileDiskFull(t *testing.T) {
	t.Parallel()
	ws, err := OpenWorkspace(filepath.Join(t.TempDir(), "ws"), -1, -1)
	must(t, err)
	defer ws.Close()
	ws.disk = DiskLimit{Bytes: 64 << 20, Mode: DiskLoop}
	err = ws.pathErr("write", "big", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC})
	if !errors.Is(err, ErrDiskFull) || !strings.Contains(err.Error(), "64.0 MB") {
		t.Errorf("ENOSPC = %v", err)
	}
}
