package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbox/agentbox/internal/units"
	"golang.org/x/sys/unix"
)

// Workspace images: formatted by e2fsprogs (mkfs.ext4, e2fsck, resize2fs),
// attached to loop devices through /dev/loop-control and mounted with
// mount(2) (golang.org/x/sys/unix). Loop devices are attached with
// autoclear, so the kernel detaches one as soon as its last mount is gone:
// a failed mount, an unmount or a crash between the two never leaks one.

// imageSuffix ends a workspace image's name: {user}/.{chat}.disk.
const imageSuffix = ".disk"

// imageAlign is what image sizes are rounded down to.
const imageAlign = 1 << 20

// MinDisk is the smallest disk limit: below it ext4's own metadata and
// journal leave too little for files.
const MinDisk = 32 << 20

func imagePath(root, user, chat string) string {
	return filepath.Join(root, user, "."+chat+imageSuffix)
}

// e2fsTool finds an e2fsprogs program on PATH or in the sbin folders,
// which a non-login PATH may lack.
func e2fsTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (install e2fsprogs)", name)
}

// runTool runs an e2fsprogs program, bounded by ctx; its error carries
// the program's output.
func runTool(ctx context.Context, name string, args ...string) error {
	bin, err := e2fsTool(name)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 500 {
			msg = msg[len(msg)-500:]
		}
		return fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return nil
}

func alignImage(n int64) int64 { return max(MinDisk, n/imageAlign*imageAlign) }

// makeImage creates the sparse ext4 image img of size bytes, its root
// folder owned by uid:gid (when uid >= 0), filled with a copy of the
// folder src when src is not "" (owners, modes, links and special files
// kept). It writes to a temporary name and renames it into place, so img
// is either absent or complete.
func makeImage(ctx context.Context, img string, size int64, uid, gid int, src string) error {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := img + ".tmp-" + hex.EncodeToString(suffix[:])
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("disk image: %w", err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk image: %w", err)
	}
	ext := "lazy_itable_init=1,lazy_journal_init=1"
	if uid >= 0 {
		ext += fmt.Sprintf(",root_owner=%d:%d", uid, gid)
	}
	// -m 0: no blocks reserved for root, the agent is not root. A 16 MiB
	// journal (the default grows to 1 GiB with the size) bounds what an
	// idle image costs the host once its journal has been written through.
	args := []string{"-q", "-F", "-t", "ext4", "-m", "0", "-L", "agentbox", "-E", ext}
	if size >= 1<<30 {
		args = append(args, "-J", "size=16")
	}
	if src != "" {
		args = append(args, "-d", src)
	}
	if err := runTool(ctx, "mkfs.ext4", append(args, tmp)...); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk image: %w", err)
	}
	if err := os.Rename(tmp, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("disk image: %w", err)
	}
	return nil
}

// resizeImage changes the size of the image img, which nothing has
// attached, to size. It grows the filesystem with resize2fs, offline
// (online resizing needs CAP_SYS_RESOURCE, which a server in a container
// often lacks). It shrinks by copying the files into a new image of the
// new size (resize2fs refuses to shrink ext4 with flex_bg far below what
// it holds): that fails, leaving img as it was, when the files do not
// fit. uid and gid own the new image's root, as for makeImage.
func resizeImage(ctx context.Context, img string, size int64, uid, gid int) error {
	st, err := os.Stat(img)
	if err != nil {
		return err
	}
	if size > st.Size() {
		// resize2fs insists on a freshly checked filesystem. e2fsck exits
		// 1 when it fixed something, which is fine here.
		if err := runTool(ctx, "e2fsck", "-f", "-y", img); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				return err
			}
		}
		return runTool(ctx, "resize2fs", img, strconv.FormatInt(size/1024, 10)+"K")
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	mnt := img + ".shrink-" + hex.EncodeToString(suffix[:])
	next := img + ".new-" + hex.EncodeToString(suffix[:])
	if err := os.Mkdir(mnt, 0o700); err != nil {
		return err
	}
	defer os.Remove(mnt)
	if err := mountImage(img, mnt); err != nil {
		return err
	}
	err = makeImage(ctx, next, size, uid, gid, mnt)
	if uerr := unmount(mnt); err == nil && uerr != nil {
		err = uerr
	}
	if err == nil {
		err = os.Rename(next, img)
	}
	if err != nil {
		os.Remove(next)
		return fmt.Errorf("shrink to %s: %w", units.FormatBytes(size), err)
	}
	return nil
}

// loopFor returns the loop device ("/dev/loop3") backing img, or "" when
// none does. A device found here may be mounted elsewhere (a leftover
// container's mount namespace, an earlier crash): img must then be
// mounted through it, never through a second device, which would give
// the same blocks two filesystems and corrupt them.
func loopFor(img string) (string, error) {
	ist, err := os.Stat(img)
	if err != nil {
		return "", err
	}
	for _, l := range loopDevices() {
		if l.backing != "" {
			if st, err := os.Stat(l.backing); err == nil && os.SameFile(st, ist) {
				return l.dev, nil
			}
		}
	}
	return "", nil
}

// waitDetached waits a moment for the loop device backing img to go
// after its last unmount (the kernel detaches it asynchronously, which
// takes seconds on a loaded host) and returns it if it is still there.
func waitDetached(img string) string {
	deadline := time.Now().Add(10 * time.Second)
	for {
		dev, err := loopFor(img)
		if err != nil || dev == "" || time.Now().After(deadline) {
			return dev
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mountedDevice returns the device number ("7:3") of what is mounted at
// dir, or "" when dir is not a mount point.
func mountedDevice(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	pst, err := os.Stat(filepath.Dir(dir))
	if err != nil {
		return "", err
	}
	d, pd := uint64(st.Sys().(*syscall.Stat_t).Dev), uint64(pst.Sys().(*syscall.Stat_t).Dev) // Dev is int32 on darwin
	if d == pd {
		return "", nil
	}
	return fmt.Sprintf("%d:%d", unix.Major(d), unix.Minor(d)), nil
}

// removeLostFound removes the empty lost+found that mkfs and e2fsck make:
// the agent should find its workspace as it left it. e2fsck makes it
// again when it needs one. A lost+found the agent made (not root's) stays.
func removeLostFound(dir string) {
	p := filepath.Join(dir, "lost+found")
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() {
		return
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && s.Uid == 0 {
		_ = unix.Rmdir(p) // fails when not empty: then it stays
	}
}
