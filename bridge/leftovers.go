package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/owner"
)

// ownerFile, in a session's directory, names the process that owns it
// (owner.Self), so a server starting after a crash can tell its own
// leftovers from a live server's sessions.
const ownerFile = "owner"

// DefaultStaleGrace is how old a session directory whose owner cannot be
// told (no owner file: written by an older version, or the crash came
// between creating the directory and naming its owner) must be before
// CleanStale removes it.
const DefaultStaleGrace = 24 * time.Hour

// DefaultDir is the parent of the session directories when Options.Dir is
// empty.
func DefaultDir() string { return filepath.Join(os.TempDir(), "agentbox-bridge") }

// writeOwner names this process as the owner of dir.
func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(owner.Self()+"\n"), 0o600)
}

// CleanStale removes the session directories under parent ("" =
// DefaultDir()) that a process which is gone left behind (a crashed
// server, a killed `agentbox run`): the sockets and the directory. It
// spares this process's sessions and those of live processes; a directory
// without an owner it removes once older than grace (0: DefaultStaleGrace).
// It returns the names of the directories it removed, sorted; a directory
// it cannot remove does not stop it (the errors are joined).
func CleanStale(parent string, grace time.Duration, log *slog.Logger) ([]string, error) {
	if parent == "" {
		parent = DefaultDir()
	}
	if grace <= 0 {
		grace = DefaultStaleGrace
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ents, err := os.ReadDir(parent)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bridge leftovers: %w", err)
	}
	self := owner.Self()
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		reason, stale := staleReason(dir, self, grace)
		if !stale {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("bridge leftovers: %w", err))
			continue
		}
		log.Info("bridge folder of a dead session removed", "dir", dir, "reason", reason)
		removed = append(removed, e.Name())
	}
	sort.Strings(removed)
	return removed, errors.Join(errs...)
}

// staleReason says whether the session directory dir is a dead process's,
// and why.
func staleReason(dir, self string, grace time.Duration) (string, bool) {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err == nil {
		id := strings.TrimSpace(string(b))
		switch {
		case id == self:
			return "", false
		case !owner.Alive(id):
			return "its process " + id + " is gone", true
		}
		return "", false
	}
	st, err := os.Lstat(dir)
	if err != nil || time.Since(st.ModTime()) <= grace {
		return "", false
	}
	return fmt.Sprintf("no owner, older than %s", grace), true
}
