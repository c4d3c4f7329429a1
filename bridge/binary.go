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
	sum, err := contentKey(binary, st)
	if err != nil {
		return binary, nil
	}
	name := filepath.Join(dir, prefix+sum)
	if cst, err := os.Stat(name); err == nil && cst.Mode().Perm() == mode && cst.Size() == st.Size() {
		if now := time.Now(); now.Sub(cst.ModTime()) > time.Hour {
			_ = os.Chtimes(name, now, now) // in use: not stale
		}
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

// contentKeys caches each binary's content key by path, size and
// modification time: hashing it takes a while, and every session asks.
var contentKeys sync.Map

type binaryID struct {
	path  string
	size  int64
	mtime int64
}

// contentKey is a short hash of the binary's content.
func contentKey(binary string, st os.FileInfo) (string, error) {
	id := binaryID{binary, st.Size(), st.ModTime().UnixNano()}
	if k, ok := contentKeys.Load(id); ok {
		return k.(string), nil
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
	contentKeys.Store(id, k)
	return k, nil
}
