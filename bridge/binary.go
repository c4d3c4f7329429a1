package bridge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// mountedBinary returns the agentbox binary to mount into sandboxes: an
// execute-only (0711) copy in dir (made when missing), once per binary and
// kept: the kernel makes a process whose binary its user cannot read
// non-dumpable from its start, so the agent's processes cannot open the
// in-sandbox relays' /proc/PID/fd (the CLI's input and output pass through
// them). A binary that is not readable by others already is used as it
// is; where no copy can be made, too (the relays also make themselves
// non-dumpable, see Harden). With readable (Options.ReadableBinary), the
// binary as it is when others may read and run it, else a 0755 copy made
// the same way.
//
// Copies are named by their content, so every process running the same
// build shares one; when a new one is made, a copy no process has used for
// copyMaxAge is removed, and so are all but the maxCopies most recently
// used (each is the size of the binary: a host sees a new build at every
// upgrade, a developer's at every build). A process whose copy was removed
// makes it again at its next session; sandboxes that mount it keep theirs.
func mountedBinary(binary, dir string, readable bool) (string, error) {
	st, err := os.Stat(binary)
	if err != nil {
		return "", fmt.Errorf("bridge binary: %w", err)
	}
	mode, prefix := os.FileMode(0o711), "agentbox-"
	if readable {
		if st.Mode().Perm()&0o005 == 0o005 {
			return binary, nil
		}
		mode, prefix = 0o755, "agentbox-readable-"
	} else if st.Mode().Perm()&0o044 == 0 {
		return binary, nil
	}
	// Traversable by the sandbox user, who runs the copy (the local
	// runtime binds it as that user), not listable.
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return binary, nil
	}
	sum, err := contentKey(binary, dir, st)
	if err != nil {
		return binary, nil
	}
	name := filepath.Join(dir, prefix+sum)
	if cst, err := os.Stat(name); err == nil && cst.Mode().Perm() == mode && cst.Size() == st.Size() {
		touch(name) // in use: not stale
		return name, nil
	}
	src, err := os.Open(binary)
	if err != nil {
		return binary, nil
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, ".agentbox-*")
	if err != nil {
		return binary, nil
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return binary, nil
	}
	removeStaleCopies(dir, name, time.Now().Add(-copyMaxAge))
	return name, nil
}

// copyMaxAge is how long an execute-only copy no process uses is kept,
// and maxCopies how many copies at most (with the new one).
const (
	copyMaxAge = 24 * time.Hour
	maxCopies  = 8
)

// removeStaleCopies removes the copies in dir, but keep, that nothing has
// used since before, and the least recently used beyond maxCopies. A
// server still running an older build touches its copy at least hourly
// while it uses it, and makes it again if it is gone.
func removeStaleCopies(dir, keep string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type copyFile struct {
		path string
		used time.Time
	}
	var kept []copyFile
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if p == keep || !strings.HasPrefix(e.Name(), "agentbox-") {
			continue
		}
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if info.ModTime().Before(before) {
			_ = os.Remove(p)
			continue
		}
		kept = append(kept, copyFile{p, info.ModTime()})
	}
	if len(kept) < maxCopies {
		return
	}
	slices.SortFunc(kept, func(a, b copyFile) int { return b.used.Compare(a.used) })
	for _, c := range kept[maxCopies-1:] {
		_ = os.Remove(c.path)
	}
}

// contentKeys caches each binary's content key by its identity
// (binaryID): hashing it takes a while, and every session asks.
var contentKeys sync.Map

// binaryID identifies a binary's content without reading it: its path,
// file (device and inode), size, and modification and change times. A
// build written over it, in place or renamed there, changes the inode or
// the change time, which no process can set.
type binaryID struct {
	path       string
	dev, ino   uint64
	size       int64
	mtime      int64
	ctime      int64
	identified bool // dev, ino and ctime known (Linux)
}

// contentKey is a short hash of the binary's content. Hashing a binary of
// some 80 MB takes 70 ms or more, which a process's first session would
// wait for before its sandbox is made (agentbox run: every run), so the
// key is also kept in dir, under a name made of the binary's identity,
// for the next process to read instead.
func contentKey(binary, dir string, st os.FileInfo) (string, error) {
	id := identify(binary, st)
	if k, ok := contentKeys.Load(id); ok {
		return k.(string), nil
	}
	keyFile := ""
	if id.identified {
		h := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%d\x00%d", id.path, id.dev, id.ino, id.size, id.mtime, id.ctime))
		keyFile = filepath.Join(dir, keyPrefix+hex.EncodeToString(h[:12]))
		if b, err := os.ReadFile(keyFile); err == nil && validKey(string(b)) {
			touch(keyFile)
			contentKeys.Store(id, string(b))
			return string(b), nil
		}
	}
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	k := hex.EncodeToString(h.Sum(nil)[:12])
	// The file may have changed while it was read: its key is kept only
	// when its identity is still the one read.
	if st2, err := f.Stat(); err == nil && identify(binary, st2) == id {
		contentKeys.Store(id, k)
		if keyFile != "" {
			writeKey(dir, keyFile, k)
			removeStaleKeys(dir, time.Now().Add(-copyMaxAge))
		}
	}
	return k, nil
}

// keyPrefix names the files in the copies' folder that keep content keys.
const keyPrefix = ".key-"

// validKey reports a content key as contentKey makes them (24 hex digits).
func validKey(k string) bool {
	if len(k) != 24 {
		return false
	}
	_, err := hex.DecodeString(k)
	return err == nil
}

// writeKey keeps key in keyFile, whole or not at all (a failure leaves
// the next process to hash the binary again).
func writeKey(dir, keyFile, key string) {
	tmp, err := os.CreateTemp(dir, ".agentbox-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(key)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		_ = os.Rename(tmp.Name(), keyFile)
	}
}

// removeStaleKeys removes the content keys in dir that nothing has read
// since before: their builds are gone or unused (each path a binary was
// run from has its own: test builds, upgrades).
func removeStaleKeys(dir string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), keyPrefix) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// touch marks a file kept in the copies' folder as used, at most hourly,
// so that removeStaleCopies keeps it.
func touch(name string) {
	if st, err := os.Stat(name); err == nil {
		if now := time.Now(); now.Sub(st.ModTime()) > time.Hour {
			_ = os.Chtimes(name, now, now)
		}
	}
}
