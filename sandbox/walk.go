package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// openDir opens the folder p for listing, and nothing else: O_DIRECTORY
// and O_NOFOLLOW make a FIFO, device or symlink swapped in for it fail
// instead of blocking or leading elsewhere.
func openDir(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

// walkTree calls fn with the lstat of every entry under dir (not dir
// itself), depth first. It never follows symlinks, opens nothing but
// folders (openDir), does not descend into other filesystems (mount
// points), and stops with ctx's error when ctx ends. Entries that vanish
// while it walks are skipped.
func walkTree(ctx context.Context, dir string, fn func(p string, st fs.FileInfo)) error {
	top, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	dev := devOf(top)
	var walk func(d string) error
	walk = func(d string) error {
		f, err := openDir(d)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
				return nil // removed or replaced meanwhile
			}
			return err
		}
		defer f.Close()
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			ents, rerr := f.ReadDir(256)
			for _, e := range ents {
				p := filepath.Join(d, e.Name())
				st, err := e.Info()
				if err != nil {
					continue
				}
				fn(p, st)
				if st.IsDir() && devOf(st) == dev {
					if err := walk(p); err != nil {
						return err
					}
				}
			}
			if rerr == io.EOF || len(ents) == 0 && rerr == nil {
				return nil
			}
			if rerr != nil {
				return rerr
			}
		}
	}
	return walk(dir)
}

// diskBytes is what st takes on disk (its allocated blocks).
func diskBytes(st fs.FileInfo) int64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return s.Blocks * 512
	}
	return st.Size()
}

func devOf(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Dev)
	}
	return 0
}

// treeUsage sums, under dir, the sizes of regular files and the disk
// blocks of everything, the way du does (without crossing mount points).
func treeUsage(ctx context.Context, dir string) (files, disk int64, err error) {
	if st, err := os.Lstat(dir); err == nil {
		disk = diskBytes(st)
	}
	err = walkTree(ctx, dir, func(_ string, st fs.FileInfo) {
		if st.Mode().IsRegular() {
			files += st.Size()
		}
		disk += diskBytes(st)
	})
	return files, disk, err
}
