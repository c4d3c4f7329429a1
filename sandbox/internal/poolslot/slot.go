// Package poolslot is the host side of a pooled sandbox's workspace and
// sockets, shared by the runtimes whose warm pool attaches a chat's
// workspace to a running sandbox (docker, kubernetes).
//
// A slot is a folder on the host with two folders in it: ws, bound at the
// sandbox's /workspace with slave propagation, and run, bound at
// sandbox.PoolSocketDir. Claiming the sandbox mounts the chat's workspace
// over ws on the host (and the hidden names over it): the kernel
// propagates the mounts into the sandbox's mount namespace, where they
// cover its empty /workspace, without a call to the engine. The bridge's
// sockets are hard links in run: a Unix socket is reached through any link
// to its inode. No mount is ever made inside the sandbox; it never sees
// the host's paths. Only root may mount.
package poolslot

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/agentbox/agentbox/internal/owner"
	"github.com/agentbox/agentbox/sandbox"
)

// Slot is a pooled sandbox's folder on the host.
type Slot string

// WS is the folder bound at the sandbox's /workspace.
func (s Slot) WS() string { return filepath.Join(string(s), "ws") }

// Run is the folder bound at sandbox.PoolSocketDir.
func (s Slot) Run() string { return filepath.Join(string(s), "run") }

// New makes the slot folder of the sandbox name under dir: the folders,
// the owner file (for Sweep after a crash) and, with share, a shared bind
// of ws in a peer group of its own (for a runtime that binds it into the
// sandbox from this mount namespace; a runtime whose node runs in a
// namespace of its own needs ws under a shared mount that namespace
// receives, and no bind of its own, which would cut it off). run belongs
// to the sandbox user uid:gid.
func New(dir, name string, uid, gid int, share bool) (Slot, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("pool dir: %w", err)
	}
	s := Slot(filepath.Join(dir, name))
	if err := os.Mkdir(string(s), 0o700); err != nil {
		return "", fmt.Errorf("pool slot: %w", err)
	}
	err := os.WriteFile(filepath.Join(string(s), "owner"), []byte(owner.Self()+"\n"), 0o600)
	if err == nil {
		err = os.Mkdir(s.WS(), 0o755)
	}
	if err == nil {
		err = os.Mkdir(s.Run(), 0o700)
	}
	if err == nil {
		err = os.Chown(s.Run(), uid, gid)
	}
	if err == nil && share {
		err = shareMount(s.WS())
	}
	if err != nil {
		return "", errors.Join(fmt.Errorf("pool slot: %w", err), s.Remove())
	}
	return s, nil
}

// Remove unmounts the slot's ws (the workspace, its hidden names and the
// shared bind) and removes the slot. It never removes through a mount: a
// ws still mounted stays, with the slot. Idempotent.
func (s Slot) Remove() error {
	if s == "" {
		return nil
	}
	if err := unmountAll(s.WS()); err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	var errs []error
	if ents, err := os.ReadDir(s.Run()); err == nil {
		for _, e := range ents {
			if err := unmountAll(filepath.Join(s.Run(), e.Name())); err != nil {
				return fmt.Errorf("pool slot %s: %w", s, err)
			}
		}
	}
	for _, f := range []string{s.Run(), filepath.Join(string(s), "owner")} {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
		}
	}
	// Unmounted: what the sandbox wrote into ws before a claim is its own.
	if err := s.Clear(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, d := range []string{s.WS(), string(s)} {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	return nil
}

// Own is the workspace of a slot's ws folder while its sandbox runs
// commands before its claim (sandbox.Unclaimed). Its zero value is
// ready; it is safe for concurrent use.
type Own struct {
	mu sync.Mutex
	ws *sandbox.Workspace
}

// Open opens the workspace of s's ws folder, whose files are uid:gid's,
// once; later calls return the same until Close.
func (o *Own) Open(s Slot, uid, gid int) (*sandbox.Workspace, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ws == nil {
		ws, err := sandbox.OpenWorkspace(s.WS(), uid, gid)
		if err != nil {
			return nil, err
		}
		o.ws = ws
	}
	return o.ws, nil
}

// Close closes the workspace, if open: at the claim or the removal.
func (o *Own) Close() {
	o.mu.Lock()
	ws := o.ws
	o.ws = nil
	o.mu.Unlock()
	if ws != nil {
		_ = ws.Close()
	}
}

// Clear removes what is in the slot's ws folder (what the sandbox wrote
// there before its claim), not through a link or a mount: ws must not be
// covered (Attach, after Clear). ws itself stays.
func (s Slot) Clear() error {
	ents, err := os.ReadDir(s.WS())
	if err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	var errs []error
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(s.WS(), e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	return nil
}

// Attach mounts the workspace folder over the slot's ws, then the hidden
// names over it: an empty read-only tmpfs over a folder, the empty file
// bound read-only over a file.
func (s Slot) Attach(workspace string, hidden []sandbox.Hidden) error {
	if err := bindOver(workspace, s.WS()); err != nil {
		return err
	}
	for _, h := range hidden {
		name := strings.TrimPrefix(h.Target, sandbox.Workdir+"/")
		if err := hideIn(s.WS(), name, h.Folder); err != nil {
			return fmt.Errorf("hide %s: %w", name, err)
		}
	}
	return nil
}

// Link puts each of sockets (mounts whose target is under
// sandbox.PoolSocketDir) in the slot's run folder: a hard link of the
// socket, or a copy of a file on another file system.
func (s Slot) Link(sockets []sandbox.Mount) error {
	for _, m := range sockets {
		if err := linkInto(m.Source, filepath.Join(s.Run(), filepath.Base(m.Target))); err != nil {
			return err
		}
	}
	return nil
}

// Bind binds each of sockets (mounts whose target is under
// sandbox.PoolSocketDir) over an empty file of its name in the slot's run
// folder: for a sandbox that binds run with slave propagation, and whose
// sockets may be on another mount than the slot (a hard link cannot cross
// mounts, a bind can).
func (s Slot) Bind(sockets []sandbox.Mount) error {
	for _, m := range sockets {
		dst := filepath.Join(s.Run(), filepath.Base(m.Target))
		f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if err := errors.Join(f.Close(), bindOver(m.Source, dst)); err != nil {
			return fmt.Errorf("bind %s: %w", m.Source, err)
		}
	}
	return nil
}

// linkInto makes dst a hard link of src (a socket, or a file: copied when
// on another file system).
func linkInto(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil || !errors.Is(err, errCrossDevice) {
		return err
	}
	st, serr := os.Stat(src)
	if serr != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("link %s: %w (put the bridge's folder on the pool folder's file system)", src, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

// Sweep removes the slots under dir of processes that are gone (a crash,
// a kill): their mounts, their links and their folders. The runtime's
// reaper removes their sandboxes.
func Sweep(dir string, log *slog.Logger) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	self := owner.Self()
	for _, e := range ents {
		s := Slot(filepath.Join(dir, e.Name()))
		b, err := os.ReadFile(filepath.Join(string(s), "owner"))
		id := strings.TrimSpace(string(b))
		if err != nil || id == self || owner.Alive(id) {
			continue
		}
		if err := s.Remove(); err != nil {
			log.Error("pool slot of a dead process not removed", "slot", string(s), "error", err)
			continue
		}
		log.Info("pool slot of a dead process removed", "slot", string(s), "owner", id)
	}
}

// Sockets checks a claim's mounts against those the sandbox was made
// with: each is one of made, or a file under sandbox.PoolSocketDir
// (returned, for Link), and none of made is missing. A mismatch is
// sandbox.ErrNotPoolable.
func Sockets(made, claim []sandbox.Mount) ([]sandbox.Mount, error) {
	var links []sandbox.Mount
	for _, m := range claim {
		switch {
		case slices.Contains(made, m):
		case filepath.Dir(m.Target) == sandbox.PoolSocketDir:
			links = append(links, m)
		default:
			return nil, fmt.Errorf("mount %s (from %s) was not made with the sandbox: %w", m.Target, m.Source, sandbox.ErrNotPoolable)
		}
	}
	for _, m := range made {
		if !slices.Contains(claim, m) {
			return nil, fmt.Errorf("the sandbox has mount %s, which the claim does not: %w", m.Target, sandbox.ErrNotPoolable)
		}
	}
	return links, nil
}

// CheckPrestart refuses a Prestart spec with a mount under
// sandbox.PoolSocketDir: the sockets there come at Claim.
func CheckPrestart(mounts []sandbox.Mount) error {
	for _, m := range mounts {
		if filepath.Dir(m.Target) == sandbox.PoolSocketDir {
			return fmt.Errorf("mount %s: %w: the sockets under %s come at Claim", m.Target, sandbox.ErrNotPoolable, sandbox.PoolSocketDir)
		}
	}
	return nil
}
