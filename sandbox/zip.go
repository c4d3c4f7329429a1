package sandbox

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"syscall"
)

// ZipReport says what Zip put in the archive and what it left out.
type ZipReport struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	// Skipped counts symlinks and special files (FIFOs, sockets,
	// devices), which are never followed or opened.
	Skipped int `json:"skipped"`
}

// Zip writes the folder p of the workspace (p "." for all of it) to dst
// as a zip archive, its entries named relative to p. It walks the tree
// through the workspace's confined handle without following symlinks,
// opens only regular files (non-blocking, refusing a symlink or special
// file swapped in meanwhile), and stops with ctx's error when ctx ends.
// On an error the archive is left unfinished, so it does not read as a
// complete one.
func (w *Workspace) Zip(ctx context.Context, dst io.Writer, p string) (ZipReport, error) {
	var rep ZipReport
	rel, err := Rel(p)
	if err != nil {
		return rep, err
	}
	st, err := w.root.Lstat(rel)
	if err != nil {
		return rep, w.pathErr("zip", p, err)
	}
	if !st.IsDir() {
		return rep, fmt.Errorf("zip %q: not a folder", p)
	}
	zw := zip.NewWriter(dst)
	err = fs.WalkDir(w.root.FS(), rel, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walk
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if name == rel {
			return nil
		}
		entry := name
		if rel != "." {
			entry = name[len(rel)+1:]
		}
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return nil
			}
			h, err := zip.FileInfoHeader(info)
			if err != nil {
				return err
			}
			h.Name = entry + "/"
			_, err = zw.CreateHeader(h)
			return err
		case d.Type().IsRegular():
			n, err := w.zipFile(ctx, zw, name, entry)
			if err != nil {
				return err
			}
			if n >= 0 {
				rep.Files++
				rep.Bytes += n
			} else {
				rep.Skipped++
			}
			return nil
		}
		rep.Skipped++
		return nil
	})
	if err != nil {
		return rep, w.pathErr("zip", p, err)
	}
	if err := zw.Close(); err != nil {
		return rep, fmt.Errorf("zip %q: %w", p, err)
	}
	return rep, nil
}

// zipFile adds the regular file name as entry and returns its size, or -1
// when it is no longer a regular file (skipped).
func (w *Workspace) zipFile(ctx context.Context, zw *zip.Writer, name, entry string) (int64, error) {
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return -1, nil
		}
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !info.Mode().IsRegular() {
		return -1, nil
	}
	h, err := zip.FileInfoHeader(info)
	if err != nil {
		return 0, err
	}
	h.Name = entry
	h.Method = zip.Deflate
	out, err := zw.CreateHeader(h)
	if err != nil {
		return 0, err
	}
	return io.Copy(out, ctxReader{ctx, f})
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
