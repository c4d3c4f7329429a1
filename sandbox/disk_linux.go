package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// mountFlags: the workspace holds the agent's files, never devices or
// set-uid programs the host should honour.
const mountFlags = unix.MS_NODEV | unix.MS_NOSUID | unix.MS_NOATIME

// mountData: discard gives the blocks of deleted files back to the host
// (the loop driver punches holes in the image).
const mountData = "discard"

// loopDevice is an attached loop device.
type loopDevice struct {
	dev     string // /dev/loopN
	number  string // "7:3"
	backing string // its backing file's path, as the kernel shows it
}

// loopDevices lists the attached loop devices, from sysfs.
func loopDevices() []loopDevice {
	ents, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil
	}
	var out []loopDevice
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "loop") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/sys/block", e.Name(), "loop", "backing_file"))
		if err != nil {
			continue // not attached
		}
		num, _ := os.ReadFile(filepath.Join("/sys/block", e.Name(), "dev"))
		out = append(out, loopDevice{dev: "/dev/" + e.Name(), number: strings.TrimSpace(string(num)), backing: strings.TrimSpace(string(b))})
	}
	return out
}

// mountsUnder returns the mount points under dir (not dir itself) in this
// process's mount table (/proc/self/mountinfo).
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if mp := UnescapeMountPath(f[4]); strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// UnescapeMountPath undoes the octal escapes (\040 for a space) of a path
// in the mount table (/proc/*/mountinfo, /proc/mounts).
func UnescapeMountPath(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// deviceNumber returns dev's "major:minor".
func deviceNumber(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "dev"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// mountImage mounts img at dir: through the loop device already backing
// it, if any (see loopFor), else through a new one attached with
// autoclear.
func mountImage(img, dir string) error {
	dev, err := loopFor(img)
	if err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	if dev != "" {
		if err := unix.Mount(dev, dir, "ext4", mountFlags, mountData); err != nil {
			return fmt.Errorf("mount disk image through %s: %w", dev, err)
		}
		return nil
	}
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	defer ctl.Close()
	backing, err := os.OpenFile(img, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	defer backing.Close()
	for attempt := 0; ; attempt++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return fmt.Errorf("mount disk image: no free loop device: %w", err)
		}
		dev = "/dev/loop" + strconv.Itoa(n)
		lf, err := os.OpenFile(dev, os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("mount disk image: %w", err)
		}
		cfg := unix.LoopConfig{Fd: uint32(backing.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img)
		err = unix.IoctlLoopConfigure(int(lf.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) && attempt < 20 {
			lf.Close() // another process took it between GET_FREE and here
			continue
		}
		if err != nil {
			lf.Close()
			return fmt.Errorf("mount disk image: attach %s: %w", dev, err)
		}
		err = unix.Mount(dev, dir, "ext4", mountFlags, mountData)
		// The mount now holds the device; closing ours lets autoclear
		// detach it when the mount goes (or now, when the mount failed).
		lf.Close()
		if err != nil {
			return fmt.Errorf("mount disk image through %s: %w", dev, err)
		}
		return nil
	}
}

// unmount unmounts dir; a dir that is not mounted is fine.
// A process forked in the meantime (this server runs mkfs, bwrap, ...)
// holds copies of this process's descriptors until it execs, which makes
// the filesystem busy for a moment: EBUSY is retried for unmountWait.
func unmount(dir string) error {
	deadline := time.Now().Add(unmountWait)
	for {
		err := unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
		switch {
		case err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, fs.ErrNotExist):
			return nil
		case errors.Is(err, unix.EBUSY) && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
		default:
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
	}
}

// unmountWait bounds the retries of a busy unmount.
const unmountWait = 3 * time.Second

// detachLoop asks the kernel to detach dev; a device still mounted
// somewhere is detached when its last mount goes.
func detachLoop(dev string) error {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
	if errors.Is(err, unix.ENXIO) {
		return nil // already detached
	}
	return err
}

// probeLoop formats, mounts and unmounts a small image under dir, to learn
// whether this process can limit workspaces with images.
func probeLoop(ctx context.Context, dir string) error {
	for _, t := range []string{"mkfs.ext4", "e2fsck", "resize2fs"} {
		if _, err := e2fsTool(t); err != nil {
			return err
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	// Passed since the host booted: the kernel, its loop driver and the
	// tools are the same.
	marker := filepath.Join(filepath.Dir(dir), loopProbeMarker)
	boot := bootID()
	if b, err := os.ReadFile(marker); err == nil && boot != "" && string(b) == boot {
		return nil
	}
	// Folders made for the probe go with it: Workspaces makes them, with
	// their owner and mode, when it opens the data root.
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer func() {
		for _, d := range made {
			_ = os.Remove(d)
		}
	}()
	mnt, err := os.MkdirTemp(dir, ".probe-")
	if err != nil {
		return err
	}
	defer os.Remove(mnt)
	img := mnt + imageSuffix
	defer os.Remove(img)
	if err := makeImage(ctx, img, MinDisk, -1, -1, ""); err != nil {
		return err
	}
	if err := mountImage(img, mnt); err != nil {
		return err
	}
	werr := os.WriteFile(filepath.Join(mnt, "probe"), []byte("ok"), 0o600)
	if err := unmount(mnt); err != nil {
		return err
	}
	if werr == nil && boot != "" && len(made) == 0 {
		// Only in a data root that stays (the probe's own folders go).
		_ = os.WriteFile(marker, []byte(boot), 0o600)
	}
	return werr
}

// loopProbeMarker, in the data root, holds the boot id of the host's boot
// in which the loop probe passed there.
const loopProbeMarker = ".loop-probe"

// bootID is the kernel's id of this boot of the host ("" when unknown).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// syncFS commits the filesystem holding dir (syncfs(2)).
func syncFS(dir string) error {
	f, err := openDir(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}

// changeTime is st's change time (ctime): set by the filesystem on every
// change of the entry, never by a process.
func changeTime(st fs.FileInfo) time.Time {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return time.Unix(s.Ctim.Sec, s.Ctim.Nsec)
	}
	return st.ModTime()
}
