package poolslot

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/sandbox"
)

var errCrossDevice = unix.EXDEV

// shareMount makes dir a mount of its own in a peer group of its own,
// whose later mounts propagate to the sandboxes that bind it rslave.
func shareMount(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return errors.Join(fmt.Errorf("mount private %s: %w", dir, err), unmountAll(dir))
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return errors.Join(fmt.Errorf("mount shared %s: %w", dir, err), unmountAll(dir))
	}
	return nil
}

// bindOver binds src over dst.
func bindOver(src, dst string) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// hideIn mounts an empty read-only folder (a tmpfs) or file over name in
// dir. The name is opened without following a symlink, and the mount goes
// over what was opened: the agent cannot swap it for a link meanwhile.
func hideIn(dir, name string, folder bool) error {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	fd, err := unix.Openat(d, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if isDir != folder || !isDir && st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s changed kind", name)
	}
	target := "/proc/self/fd/" + strconv.Itoa(fd)
	if folder {
		return unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
	}
	empty, err := sandbox.EmptyFile()
	if err != nil {
		return err
	}
	if err := unix.Mount(empty, target, "", unix.MS_BIND, ""); err != nil {
		return err
	}
	return unix.Mount("", filepath.Join(dir, name), "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// unmountAll detaches every mount stacked on dir (and what is mounted
// below them), until dir is a plain folder again.
func unmountAll(dir string) error {
	for range 16 {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		switch {
		case err == nil:
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
			return nil // not a mount point (any more)
		default:
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", dir)
}

// Propagated checks that the sandbox whose init is pid (in this host's
// pid namespace) sees at least want mounts over its /workspace's own
// beyond the slot's bind (the workspace and its hidden names), read from
// its mountinfo.
func Propagated(pid, want int) error {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return fmt.Errorf("mounts of the sandbox: %w", err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == sandbox.Workdir || strings.HasPrefix(fields[4], sandbox.Workdir+"/")) {
			n++
		}
	}
	if n < 1+want {
		return fmt.Errorf("the workspace's mounts did not reach the sandbox (%d of %d)", n-1, want)
	}
	return nil
}

// SharedMount reports whether dir lies on a mount with shared
// propagation, one whose later mounts reach its peers and slaves (a node
// in a mount namespace of its own that receives this host's mounts).
func SharedMount(dir string) (bool, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	best, shared := "", false
	for line := range strings.SplitSeq(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 7 {
			continue
		}
		mp := sandbox.UnescapeMountPath(fields[4])
		if mp != "/" && dir != mp && !strings.HasPrefix(dir, mp+"/") || len(mp) < len(best) {
			continue
		}
		best, shared = mp, false
		for _, opt := range fields[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	return shared, nil
}

// ProbeMount mounts a small empty read-only tmpfs over dir: a mount whose
// arrival in a sandbox proves that mounts made there reach it. Unmount
// takes it away.
func ProbeMount(dir string) error {
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555")
}

// Unmount detaches every mount stacked on dir.
func Unmount(dir string) error { return unmountAll(dir) }
