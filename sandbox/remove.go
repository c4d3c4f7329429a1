package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Remove deletes the workspace of (user, chat) with everything in it and
// its last-use marker: a chat deleted by its user. It refuses, with an
// error wrapping ErrInUse, while a request of this or another process
// holds the workspace (end those first); it uses the prune's locking, so
// an Acquire racing with it either wins or gets a fresh, empty folder. A
// workspace that does not exist is not an error.
func (w *Workspaces) Remove(ctx context.Context, user, chat string) error {
	if err := validateIDs(user, chat); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Join(w.root, user, chat)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.Remove(markerPath(w.root, user, chat)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove workspace %s/%s: marker: %w", user, chat, err)
		}
		return nil
	}
	// An image kept mounted after its last release goes now, not when its
	// keep-mounted time ends.
	key := user + "/" + chat
	ds := w.diskState(key)
	ds.sem <- struct{}{}
	w.cancelIdle(key, ds)
	<-ds.sem
	w.putDiskState(key, ds)
	pr := &pruner{root: w.root, inUse: w}
	// A cutoff in the far future: however recently it was used, it goes.
	never := time.Now().AddDate(100, 0, 0)
	_, outcome, err := pr.pruneOne(pruneCandidate{user: user, chat: chat, hasMarker: true}, never, false)
	switch {
	case err != nil:
		return fmt.Errorf("remove workspace: %w", err)
	case outcome == outcomeInUse:
		return fmt.Errorf("remove workspace %s/%s: %w", user, chat, ErrInUse)
	case outcome == outcomeKept:
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			return nil // removed by someone else meanwhile
		}
		return fmt.Errorf("remove workspace %s/%s: %w", user, chat, ErrInUse)
	}
	return nil
}
