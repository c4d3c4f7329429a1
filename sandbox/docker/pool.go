package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/agentbox/agentbox/internal/owner"
	"github.com/agentbox/agentbox/sandbox"
)

// A pooled container (Prestart) is made like any other, but its
// /workspace is the bind of an empty folder on the host, the slot's ws
// folder, made a shared mount and bound into the container with rslave
// propagation, and its PoolSocketDir is the bind of the slot's run
// folder. A claim mounts the chat's workspace over the slot's ws folder
// on the host (and the hidden names over it): the kernel propagates the
// mounts into the container's mount namespace, where they cover the empty
// /workspace, in a few hundred microseconds and without an engine call.
// The bridge's sockets are hard links in the run folder: a Unix socket is
// reached through any link to its inode. No mount is ever made inside the
// container; the container never sees the host's paths.
//
// Only root may mount, and gVisor's kernel sees no mount made after its
// start: Prestart refuses both with ErrNotPoolable.

// LabelPool marks a container made ahead of demand; its value is the
// slot folder's name.
const LabelPool = "dev.agentbox.pool"

// poolOwner is the user and chat of a pooled container's labels (labels
// cannot change once it runs): the chat's are in the claimed Sandbox.
const poolOwner = "pool"

// DefaultPoolDir is the parent of the pooled containers' slot folders when
// Options.PoolDir is empty: beside the bridge's session folders (the same
// file system, for the sockets' hard links).
func DefaultPoolDir() string { return filepath.Join(os.TempDir(), "agentbox-pool") }

var _ sandbox.Pooler = (*Runtime)(nil)

// Prestart creates a hardened container for spec's image, limits, network
// and mounts, with an empty /workspace, for a chat to claim.
func (r *Runtime) Prestart(ctx context.Context, spec sandbox.Spec) (sandbox.Pooled, error) {
	if spec.Image == "" {
		spec.Image = r.opts.Image
	}
	if err := poolable(spec); err != nil {
		return nil, err
	}
	for _, m := range spec.Mounts {
		if filepath.Dir(m.Target) == sandbox.PoolSocketDir {
			return nil, fmt.Errorf("docker prestart: mount %s: %w: the sockets under %s come at Claim", m.Target, sandbox.ErrNotPoolable, sandbox.PoolSocketDir)
		}
	}
	r.sweepOnce.Do(r.sweepSlots)
	name := "agentbox-" + randHex(8)
	sl, err := newSlot(r.poolDir(), name, r.opts.User)
	if err != nil {
		return nil, err
	}
	spec.UserID, spec.ChatID = poolOwner, poolOwner
	spec.Env, spec.Hide = nil, nil
	ws := mount.Mount{Type: mount.TypeBind, Source: sl.ws(), Target: sandbox.Workdir,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRSlave}}
	cfg, hc, err := r.containerConfig(spec, ws, nil, name, time.Now())
	if err != nil {
		sl.remove()
		return nil, err
	}
	cfg.Labels[LabelPool] = name
	hc.Mounts = append(hc.Mounts, bindMount(sl.run(), sandbox.PoolSocketDir, false))
	id, err := r.start(ctx, name, cfg, hc)
	if err != nil {
		sl.remove()
		return nil, err
	}
	return &Pooled{rt: r, id: id, name: name, slot: sl, mounts: slices.Clone(spec.Mounts)}, nil
}

// poolable refuses what a pooled container cannot be given.
func poolable(spec sandbox.Spec) error {
	switch {
	case spec.Isolation == sandbox.IsolationGVisor:
		return fmt.Errorf("docker prestart: %w: gVisor's kernel sees no mount made after the sandbox started", sandbox.ErrNotPoolable)
	case os.Geteuid() != 0:
		return fmt.Errorf("docker prestart: %w: attaching a workspace to a running container needs root on the host", sandbox.ErrNotPoolable)
	}
	return nil
}

// PoolDir is the parent of the pooled containers' slot folders.
func (r *Runtime) PoolDir() string { return r.poolDir() }

func (r *Runtime) poolDir() string {
	if r.opts.PoolDir != "" {
		return r.opts.PoolDir
	}
	return DefaultPoolDir()
}

// Pooled is a container made ahead of demand (Prestart). Claim makes it a
// chat's Sandbox, once.
type Pooled struct {
	rt     *Runtime
	id     string
	name   string
	slot   slot
	mounts []sandbox.Mount

	mu      sync.Mutex
	claimed bool
	removed bool
}

var _ sandbox.Pooled = (*Pooled)(nil)

// ID returns the container id.
func (p *Pooled) ID() string { return p.id }

// Name returns the container name.
func (p *Pooled) Name() string { return p.name }

// Claim checks the container (running, not paused, never claimed, the
// slot's workspace folder empty and unmounted) and attaches spec's
// workspace, hidden names, sockets and environment. A spec whose image,
// limits or mounts differ from what the container was made with is
// ErrNotPoolable; the caller then Removes it.
func (p *Pooled) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	p.mu.Lock()
	if p.claimed || p.removed {
		p.mu.Unlock()
		return nil, fmt.Errorf("docker claim %s: already claimed or removed: %w", p.name, sandbox.ErrNotPoolable)
	}
	p.claimed = true
	p.mu.Unlock()
	if err := checkOwner(spec); err != nil {
		return nil, err
	}
	if err := poolable(spec); err != nil {
		return nil, err
	}
	links, err := p.sockets(spec.Mounts)
	if err != nil {
		return nil, err
	}
	if _, err := sandbox.MergeEnv(map[string]string{"HOME": p.rt.opts.Home}, spec.Env); err != nil {
		return nil, fmt.Errorf("docker claim: %w", err)
	}
	pid, err := p.check(ctx)
	if err != nil {
		return nil, err
	}
	hidden, err := sandbox.PrepareHide(ctx, spec.Workspace, spec.Hide)
	if err != nil {
		return nil, fmt.Errorf("docker claim: %w", err)
	}
	for _, l := range links {
		if err := linkInto(l.Source, filepath.Join(p.slot.run(), filepath.Base(l.Target))); err != nil {
			return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
		}
	}
	if err := p.slot.attach(spec.Workspace.Dir(), hidden); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	if err := propagated(pid, 1+len(hidden)); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	env := map[string]string{}
	for k, v := range spec.Env {
		env[k] = v
	}
	return &Sandbox{rt: p.rt, id: p.id, name: p.name, ws: spec.Workspace, env: env, terms: map[*terminal]struct{}{},
		release: p.slot.remove}, nil
}

// sockets checks the claim's mounts against the container's: each is one
// it was made with, or a file under PoolSocketDir (returned, to link), and
// none it was made with is missing.
func (p *Pooled) sockets(mounts []sandbox.Mount) ([]sandbox.Mount, error) {
	var links []sandbox.Mount
	for _, m := range mounts {
		switch {
		case slices.Contains(p.mounts, m):
		case filepath.Dir(m.Target) == sandbox.PoolSocketDir:
			links = append(links, m)
		default:
			return nil, fmt.Errorf("docker claim: mount %s (from %s) was not made with the sandbox: %w", m.Target, m.Source, sandbox.ErrNotPoolable)
		}
	}
	for _, m := range p.mounts {
		if !slices.Contains(mounts, m) {
			return nil, fmt.Errorf("docker claim: the sandbox has mount %s, which the claim does not: %w", m.Target, sandbox.ErrNotPoolable)
		}
	}
	return links, nil
}

// check inspects the container: running, not paused, still ours and
// unclaimed. It returns the pid of its init on the host.
func (p *Pooled) check(ctx context.Context) (int, error) {
	r := p.rt
	ictx, cancel := r.call(ctx)
	ins, err := r.cli.ContainerInspect(ictx, p.id)
	cancel()
	if err != nil {
		return 0, r.engineErr(ctx, "claim: inspect", err)
	}
	switch st := ins.State; {
	case st == nil || !st.Running || st.Paused || st.Restarting || st.OOMKilled || st.Pid <= 0:
		return 0, fmt.Errorf("docker claim %s: the container is not running as it was made", p.name)
	case ins.Config == nil || ins.Config.Labels[LabelPool] != p.name:
		return 0, fmt.Errorf("docker claim %s: the container is not the pooled one", p.name)
	default:
		return st.Pid, nil
	}
}

// Remove removes the unclaimed container and its slot. Idempotent.
func (p *Pooled) Remove(ctx context.Context) error {
	p.mu.Lock()
	if p.removed {
		p.mu.Unlock()
		return nil
	}
	p.removed = true
	p.mu.Unlock()
	err := p.rt.remove(ctx, p.id)
	if err == nil {
		p.rt.tracked.drop(p.name)
	}
	return errors.Join(err, p.slot.remove())
}

// MemoryUsage is the container's memory use now (Sandbox.MemoryUsage).
func (p *Pooled) MemoryUsage(ctx context.Context) (int64, error) {
	return (&Sandbox{rt: p.rt, id: p.id, name: p.name}).MemoryUsage(ctx)
}

// slot is a pooled container's folder on the host: ws, bound at
// /workspace, and run, bound at PoolSocketDir.
type slot string

func (s slot) ws() string  { return filepath.Join(string(s), "ws") }
func (s slot) run() string { return filepath.Join(string(s), "run") }

// newSlot makes the slot folder of the container name under dir: the
// folders, the owner file (for the sweep after a crash) and the shared
// bind of ws. run belongs to the sandbox user (user, "uid:gid").
func newSlot(dir, name, user string) (slot, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return "", fmt.Errorf("docker prestart: pool dir: %w", err)
	}
	s := slot(filepath.Join(dir, name))
	if err := os.Mkdir(string(s), 0o700); err != nil {
		return "", fmt.Errorf("docker prestart: slot: %w", err)
	}
	err := os.WriteFile(filepath.Join(string(s), "owner"), []byte(owner.Self()+"\n"), 0o600)
	if err == nil {
		err = os.Mkdir(s.ws(), 0o755)
	}
	if err == nil {
		err = os.Mkdir(s.run(), 0o700)
	}
	if err == nil {
		uid, gid := ids(user)
		err = os.Chown(s.run(), uid, gid)
	}
	if err == nil {
		err = shareMount(s.ws())
	}
	if err != nil {
		s.remove()
		return "", fmt.Errorf("docker prestart: slot: %w", err)
	}
	return s, nil
}

// ids parses "uid:gid" (gid defaults to uid).
func ids(user string) (int, int) {
	u, g, _ := strings.Cut(user, ":")
	uid, _ := strconv.Atoi(u)
	gid, err := strconv.Atoi(g)
	if err != nil {
		gid = uid
	}
	return uid, gid
}

// remove unmounts the slot's ws (the workspace, its hidden names and the
// shared bind) and removes the slot. It never removes through a mount: a
// ws still mounted stays, with the slot.
func (s slot) remove() error {
	if s == "" {
		return nil
	}
	if err := unmountAll(s.ws()); err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	var errs []error
	for _, f := range []string{s.run(), filepath.Join(string(s), "owner")} {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{s.ws(), string(s)} {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool slot %s: %w", s, err)
	}
	return nil
}

// attach mounts the workspace folder over the slot's ws, then the hidden
// names over it: an empty read-only tmpfs over a folder, the empty file
// bound read-only over a file.
func (s slot) attach(workspace string, hidden []sandbox.Hidden) error {
	if err := bindOver(workspace, s.ws()); err != nil {
		return err
	}
	for _, h := range hidden {
		name := strings.TrimPrefix(h.Target, sandbox.Workdir+"/")
		if err := hideIn(s.ws(), name, h.Folder); err != nil {
			return fmt.Errorf("hide %s: %w", name, err)
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

// sweepSlots removes the slots of processes that are gone (a crash, a
// kill): their mounts, their links and their folders. The reaper removes
// their containers.
func (r *Runtime) sweepSlots() {
	dir := r.poolDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	self := owner.Self()
	for _, e := range ents {
		s := slot(filepath.Join(dir, e.Name()))
		b, err := os.ReadFile(filepath.Join(string(s), "owner"))
		id := strings.TrimSpace(string(b))
		if err != nil || id == self || owner.Alive(id) {
			continue
		}
		if err := s.remove(); err != nil {
			r.opts.Logger.Error("pool slot of a dead process not removed", "slot", string(s), "error", err)
			continue
		}
		r.opts.Logger.Info("pool slot of a dead process removed", "slot", string(s), "owner", id)
	}
}
