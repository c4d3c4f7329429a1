package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/mount"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/internal/poolslot"
)

// A pooled container (Prestart) is made like any other, but its
// /workspace is the bind of an empty folder on the host, the ws folder of
// its slot (poolslot), made a shared mount and bound into the container
// with rslave propagation, and its PoolSocketDir is the bind of the
// slot's run folder. A claim mounts the chat's workspace over the slot's
// ws folder on the host: the kernel propagates the mounts into the
// container's mount namespace in a few hundred microseconds and without
// an engine call.
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
	if err := poolslot.CheckPrestart(spec.Mounts); err != nil {
		return nil, fmt.Errorf("docker prestart: %w", err)
	}
	// A container made ahead of any chat is labelled the pool's; one
	// started for a chat whose workspace is still being made (the cold
	// path) carries the chat's labels from the start.
	if spec.UserID == "" || spec.ChatID == "" {
		spec.UserID, spec.ChatID = poolOwner, poolOwner
	}
	if err := sandbox.ValidateID("user", spec.UserID); err != nil {
		return nil, fmt.Errorf("docker prestart: %w", err)
	}
	if err := sandbox.ValidateID("chat", spec.ChatID); err != nil {
		return nil, fmt.Errorf("docker prestart: %w", err)
	}
	r.sweepOnce.Do(r.sweepSlots)
	name := "agentbox-" + randHex(8)
	uid, gid := ids(r.opts.User)
	sl, err := poolslot.New(r.poolDir(), name, uid, gid, true)
	if err != nil {
		return nil, fmt.Errorf("docker prestart: %w", err)
	}
	spec.Env, spec.Hide = nil, nil
	ws := mount.Mount{Type: mount.TypeBind, Source: sl.WS(), Target: sandbox.Workdir,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRSlave}}
	cfg, hc, err := r.containerConfig(spec, ws, nil, name, time.Now())
	if err != nil {
		sl.Remove()
		return nil, err
	}
	cfg.Labels[LabelPool] = name
	hc.Mounts = append(hc.Mounts, bindMount(sl.Run(), sandbox.PoolSocketDir, false))
	id, err := r.start(ctx, name, cfg, hc)
	if err != nil {
		sl.Remove()
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
	slot   poolslot.Slot
	mounts []sandbox.Mount

	mu      sync.Mutex
	claimed bool
	removed bool
	// own is the workspace of the container's own folder, while it runs
	// commands before its claim (Unclaimed).
	own poolslot.Own
}

var _ sandbox.Unclaimed = (*Pooled)(nil)

// ID returns the container id.
func (p *Pooled) ID() string { return p.id }

// Name returns the container name.
func (p *Pooled) Name() string { return p.name }

// Unclaimed implements sandbox.Unclaimed: the container as it runs
// before its claim, its workspace the slot's ws folder.
func (p *Pooled) Unclaimed(env map[string]string) (sandbox.Sandbox, error) {
	if _, err := sandbox.MergeEnv(map[string]string{"HOME": p.rt.opts.Home}, env); err != nil {
		return nil, fmt.Errorf("docker unclaimed %s: %w", p.name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimed || p.removed {
		return nil, fmt.Errorf("docker unclaimed %s: already claimed or removed", p.name)
	}
	uid, gid := ids(p.rt.opts.User)
	ws, err := p.own.Open(p.slot, uid, gid)
	if err != nil {
		return nil, fmt.Errorf("docker unclaimed %s: %w", p.name, err)
	}
	return &Sandbox{rt: p.rt, id: p.id, name: p.name, ws: ws, env: maps.Clone(env), terms: map[*terminal]struct{}{},
		unclaimed: true}, nil
}

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
	p.own.Close()
	if err := checkOwner(spec); err != nil {
		return nil, err
	}
	if err := poolable(spec); err != nil {
		return nil, err
	}
	links, err := poolslot.Sockets(p.mounts, spec.Mounts)
	if err != nil {
		return nil, fmt.Errorf("docker claim: %w", err)
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
	// What ran before the claim (a primed CLI) wrote into the
	// container's own folder: none of it is the chat's.
	if err := p.slot.Clear(); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	if err := p.slot.Link(links); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	if err := p.slot.Attach(spec.Workspace.Dir(), hidden); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	if err := poolslot.Propagated(pid, 1+len(hidden)); err != nil {
		return nil, fmt.Errorf("docker claim %s: %w", p.name, err)
	}
	env := map[string]string{}
	for k, v := range spec.Env {
		env[k] = v
	}
	return &Sandbox{rt: p.rt, id: p.id, name: p.name, ws: spec.Workspace, env: env, terms: map[*terminal]struct{}{},
		release: p.slot.Remove}, nil
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
	p.own.Close()
	err := p.rt.remove(ctx, p.id)
	if err == nil {
		p.rt.tracked.drop(p.name)
	}
	return errors.Join(err, p.slot.Remove())
}

// MemoryUsage is the container's memory use now (Sandbox.MemoryUsage).
func (p *Pooled) MemoryUsage(ctx context.Context) (int64, error) {
	return (&Sandbox{rt: p.rt, id: p.id, name: p.name}).MemoryUsage(ctx)
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

// sweepSlots removes the slots of processes that are gone (a crash, a
// kill): their mounts, their links and their folders. The reaper removes
// their containers.
func (r *Runtime) sweepSlots() { poolslot.Sweep(r.poolDir(), r.opts.Logger) }
