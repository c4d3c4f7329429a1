package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/internal/poolslot"
)

// A pooled pod (Prestart) is made like any other, hardened the same, but
// its /workspace is the hostPath of an empty folder on the node, the ws
// folder of its slot (poolslot), mounted with HostToContainer
// propagation, and its sandbox.PoolSocketDir the slot's run folder, the
// same way. It is labelled LabelPool=ready. A claim mounts the chat's
// workspace (and its hidden names) over the slot's ws on the host and the
// bridge's sockets over empty files in run (binds: a hard link cannot
// cross into the shared mount), and takes the pod by label: one JSON patch that tests
// LabelPool=ready and sets it to claimed with the chat's user and chat
// labels, so that of two servers claiming the same pod one wins. Last it
// checks that the pod sees the chat's workspace and hidden names: in the
// mount table of the pod's process where this host sees it (the server on
// the node), else with one exec comparing their device and inode.
//
// The propagation needs the server on the node, with the slot folders
// under a mount with shared propagation that the kubelet's mount
// namespace receives (on a node where the kubelet runs in the host's
// namespace with a shared /, any folder; on the cluster of `make
// cluster`, .cache/cluster/shared): Options.PoolDir. The first Prestart
// proves it with a probe mount, and refuses with sandbox.ErrNotPoolable
// when the pod does not see it, as it refuses claim storage (a pod on
// another node sees no mount of this host), gVisor and Kata (their
// kernel sees no mount made after the start) and a server that is not
// root (it may not mount).

// LabelPool marks a pod made ahead of demand: PoolReady until a chat
// claims it, then PoolClaimed. A claimed pod never returns to the pool.
const LabelPool = "dev.agentbox.pool"

// Values of LabelPool.
const (
	PoolReady   = "ready"
	PoolClaimed = "claimed"
)

// poolOwner is the user and chat of a pooled pod's labels until a claim
// gives it the chat's.
const poolOwner = "pool"

// DefaultPoolDir is the parent of the pooled pods' slot folders when
// Options.PoolDir is empty.
func DefaultPoolDir() string { return filepath.Join(os.TempDir(), "agentbox-kubernetes-pool") }

var _ sandbox.Pooler = (*Runtime)(nil)

// PoolDir is the parent of the pooled pods' slot folders.
func (r *Runtime) PoolDir() string {
	if r.opts.PoolDir != "" {
		return r.opts.PoolDir
	}
	return DefaultPoolDir()
}

// poolable refuses what a pooled pod cannot be given.
func (r *Runtime) poolable(spec sandbox.Spec) error {
	iso, err := r.isolation(spec.Isolation)
	switch {
	case err != nil:
		return err
	case r.opts.Storage.Claim != "":
		return fmt.Errorf("%w: with workspace_claim a pod may run on another node, where no mount of this host reaches it", sandbox.ErrNotPoolable)
	case iso == sandbox.IsolationGVisor || iso == sandbox.IsolationKata:
		return fmt.Errorf("%w: %s's kernel sees no mount made after the sandbox started", sandbox.ErrNotPoolable, iso)
	case os.Geteuid() != 0:
		return fmt.Errorf("%w: attaching a workspace to a running pod needs root on the node", sandbox.ErrNotPoolable)
	}
	return nil
}

// Prestart creates a hardened pod for spec's image, limits, network,
// isolation and mounts, with an empty /workspace, for a chat to claim,
// and waits until it runs.
func (r *Runtime) Prestart(ctx context.Context, spec sandbox.Spec) (sandbox.Pooled, error) {
	if spec.Image == "" {
		spec.Image = r.opts.Image
	}
	if err := r.poolable(spec); err != nil {
		return nil, fmt.Errorf("kubernetes prestart: %w", err)
	}
	if err := poolslot.CheckPrestart(spec.Mounts); err != nil {
		return nil, fmt.Errorf("kubernetes prestart: %w", err)
	}
	dir := r.PoolDir()
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("kubernetes prestart: pool dir: %w", err)
	}
	if shared, err := poolslot.SharedMount(dir); err != nil || !shared {
		return nil, fmt.Errorf("kubernetes prestart: %w: the pool folder %s is on no mount with shared propagation, so mounts made there never reach a pod "+
			"(set sandbox.kubernetes.pool_dir to a folder under a shared mount the kubelet's mount namespace receives; on `make cluster`, .cache/cluster/shared/pool)", sandbox.ErrNotPoolable, dir)
	}
	r.sweepOnce.Do(r.sweepSlots)
	name := "agentbox-" + randHex(8)
	sl, err := poolslot.New(dir, name, int(r.opts.UID), int(r.opts.GID), false)
	if err != nil {
		return nil, fmt.Errorf("kubernetes prestart: %w", err)
	}
	spec.UserID, spec.ChatID = poolOwner, poolOwner
	spec.Env, spec.Hide, spec.Workspace = nil, nil, nil
	pod, err := r.podFor(spec, nil, name, time.Now(), sl)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("kubernetes prestart: %w", err), sl.Remove())
	}
	pod.Labels[LabelPool] = PoolReady
	sb := &Sandbox{rt: r, name: name, terms: map[*terminal]struct{}{}, release: sl.Remove}
	if err := r.startPod(ctx, sb, pod); err != nil {
		return nil, errors.Join(err, sl.Remove())
	}
	p := &Pooled{sb: sb, slot: sl, mounts: spec.Mounts}
	if err := r.probePool(ctx, p); err != nil {
		return nil, errors.Join(fmt.Errorf("kubernetes prestart: pod %s: %w", name, err), p.Remove(ctx))
	}
	p.pid, p.cgroup = r.hostProcess(name)
	return p, nil
}

// hostProcess finds a process of the pod's sandbox container on this
// host, when it sees the node's processes (the server on the node, in its
// pid namespace): a process whose cgroup names the container's id. It
// returns its pid and that id, or 0 when there is none to see. At
// Prestart only the container's `sleep` runs, which holds its mount
// namespace.
func (r *Runtime) hostProcess(name string) (int, string) {
	pod := r.pods.get(name)
	if pod == nil {
		return 0, ""
	}
	var id string
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == containerName {
			_, id, _ = strings.Cut(cs.ContainerID, "://")
		}
	}
	if len(id) < 32 {
		return 0, ""
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, ""
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		if inCgroup(pid, id) {
			return pid, id
		}
	}
	return 0, ""
}

// inCgroup reports whether process pid is in a cgroup named after the
// container id.
func inCgroup(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && bytes.Contains(b, []byte(id))
}

// probePool proves, once per runtime, that mounts made in the slot reach
// the pod: a small read-only tmpfs over ws, which the pod must see at
// /workspace. When it does not, pooling cannot work on this node.
func (r *Runtime) probePool(ctx context.Context, p *Pooled) error {
	r.poolMu.Lock()
	defer r.poolMu.Unlock()
	if r.poolProven {
		return nil
	}
	ws := p.slot.WS()
	if err := poolslot.ProbeMount(ws); err != nil {
		return fmt.Errorf("probe mount: %w", err)
	}
	defer func() { _ = poolslot.Unmount(ws) }()
	want, err := statID(ws)
	if err != nil {
		return err
	}
	got, err := p.sb.stats(ctx, []string{sandbox.Workdir})
	if err != nil {
		return err
	}
	if got[0] != want {
		return fmt.Errorf("%w: a mount made in the pool folder %s did not reach the pod (the kubelet's mount namespace does not receive it): "+
			"set sandbox.kubernetes.pool_dir to a folder under a shared mount it receives (on `make cluster`, .cache/cluster/shared/pool)", sandbox.ErrNotPoolable, r.PoolDir())
	}
	r.poolProven = true
	return nil
}

// statID is "device inode" of path on this host, as stat -c '%d %i'
// prints it.
func statID(path string) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", st.Dev, st.Ino), nil
}

// stats runs one stat in the pod: "device inode" of each path.
func (s *Sandbox) stats(ctx context.Context, paths []string) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, min(s.rt.opts.CallTimeout, 10*time.Second))
	defer cancel()
	out, err := s.rt.run1(cctx, s.name, append([]string{"stat", "-c", "%d %i", "--"}, paths...), nil)
	if err != nil {
		return nil, fmt.Errorf("stat in the pod: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(paths) {
		return nil, fmt.Errorf("stat in the pod: %d lines for %d paths: %q", len(lines), len(paths), out)
	}
	return lines, nil
}

// sweepSlots removes the slots of processes that are gone; the reaper
// deletes their pods.
func (r *Runtime) sweepSlots() { poolslot.Sweep(r.PoolDir(), r.opts.Logger) }

// Pooled is a pod made ahead of demand (Prestart). Claim makes it a
// chat's Sandbox, once.
type Pooled struct {
	sb     *Sandbox
	slot   poolslot.Slot
	mounts []sandbox.Mount
	// pid is a process of the pod's container on this host and cgroup
	// the container's id, when this host sees the node's processes (0:
	// the claim checks the pod through an exec).
	pid    int
	cgroup string

	mu      sync.Mutex
	claimed bool
	removed bool
	// own is the workspace of the pod's own folder, while it runs
	// commands before its claim (Unclaimed).
	own poolslot.Own
}

var _ sandbox.Pooled = (*Pooled)(nil)

// ID returns the pod's name.
func (p *Pooled) ID() string { return p.sb.name }

var _ sandbox.Unclaimed = (*Pooled)(nil)

// Unclaimed implements sandbox.Unclaimed: the pod as it runs before its
// claim, its workspace the slot's ws folder.
func (p *Pooled) Unclaimed(env map[string]string) (sandbox.Sandbox, error) {
	if _, err := sandbox.MergeEnv(env); err != nil {
		return nil, fmt.Errorf("kubernetes unclaimed %s: %w", p.sb.name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimed || p.removed {
		return nil, fmt.Errorf("kubernetes unclaimed %s: already claimed or removed", p.sb.name)
	}
	ws, err := p.own.Open(p.slot, int(p.sb.rt.opts.UID), int(p.sb.rt.opts.GID))
	if err != nil {
		return nil, fmt.Errorf("kubernetes unclaimed %s: %w", p.sb.name, err)
	}
	return &Sandbox{rt: p.sb.rt, name: p.sb.name, uid: p.sb.uid, ws: ws, env: copyEnv(env), terms: map[*terminal]struct{}{},
		unclaimed: true}, nil
}

// Claim checks the pod (running, still labelled ready, never claimed),
// attaches spec's workspace, hidden names, sockets and environment, takes
// the pod by label and checks that it sees the workspace. A spec whose
// mounts differ from what the pod was made with is ErrNotPoolable; on any
// failure the caller Removes the Pooled.
func (p *Pooled) Claim(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	p.mu.Lock()
	if p.claimed || p.removed {
		p.mu.Unlock()
		return nil, fmt.Errorf("kubernetes claim %s: already claimed or removed: %w", p.sb.name, sandbox.ErrNotPoolable)
	}
	p.claimed = true
	p.mu.Unlock()
	p.own.Close()
	r, name := p.sb.rt, p.sb.name
	if spec.Workspace == nil {
		return nil, errors.New("kubernetes claim: spec has no workspace")
	}
	for _, id := range [][2]string{{"user", spec.UserID}, {"chat", spec.ChatID}} {
		if err := sandbox.ValidateID(id[0], id[1]); err != nil {
			return nil, fmt.Errorf("kubernetes claim: %w", err)
		}
	}
	if err := r.poolable(spec); err != nil {
		return nil, fmt.Errorf("kubernetes claim: %w", err)
	}
	links, err := poolslot.Sockets(p.mounts, spec.Mounts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes claim: %w", err)
	}
	if _, err := sandbox.MergeEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("kubernetes claim: %w", err)
	}
	if pod := r.pods.get(name); pod == nil || !running(pod) || pod.Labels[LabelPool] != PoolReady || r.pods.isGone(name) {
		return nil, fmt.Errorf("kubernetes claim %s: the pod is not running as it was made", name)
	}
	hidden, err := sandbox.PrepareHide(ctx, spec.Workspace, spec.Hide)
	if err != nil {
		return nil, fmt.Errorf("kubernetes claim: %w", err)
	}
	// What ran before the claim (a primed CLI) wrote into the pod's own
	// folder: none of it is the chat's.
	if err := p.slot.Clear(); err != nil {
		return nil, fmt.Errorf("kubernetes claim %s: %w", name, err)
	}
	if err := p.slot.Bind(links); err != nil {
		return nil, fmt.Errorf("kubernetes claim %s: %w", name, err)
	}
	if err := p.slot.Attach(spec.Workspace.Dir(), hidden); err != nil {
		return nil, fmt.Errorf("kubernetes claim %s: %w", name, err)
	}
	if err := r.takePod(ctx, name, spec); err != nil {
		return nil, fmt.Errorf("kubernetes claim %s: %w", name, err)
	}
	if err := p.seen(ctx, hidden); err != nil {
		return nil, fmt.Errorf("kubernetes claim %s: %w", name, err)
	}
	p.sb.ws, p.sb.env = spec.Workspace, copyEnv(spec.Env)
	return p.sb, nil
}

// takePod takes the pod by label: LabelPool from ready to claimed, and
// the chat's user and chat, in one JSON patch whose test fails when
// another claim took it first.
func (r *Runtime) takePod(ctx context.Context, name string, spec sandbox.Spec) error {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	label := func(k string) string { return "/metadata/labels/" + strings.ReplaceAll(k, "/", "~1") }
	annotation := func(k string) string { return "/metadata/annotations/" + strings.ReplaceAll(k, "/", "~1") }
	ops := []op{
		{"test", label(LabelPool), PoolReady},
		{"replace", label(LabelPool), PoolClaimed},
		{"replace", label(sandbox.LabelUser), LabelValue(spec.UserID)},
		{"replace", label(sandbox.LabelChat), LabelValue(spec.ChatID)},
		{"replace", annotation(sandbox.LabelUser), spec.UserID},
		{"replace", annotation(sandbox.LabelChat), spec.ChatID},
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	pctx, cancel := r.call(ctx)
	defer cancel()
	_, err = r.api.patch(pctx, name, types.JSONPatchType, data)
	var status apierrors.APIStatus
	if apierrors.IsInvalid(err) || errors.As(err, &status) && status.Status().Code == http.StatusUnprocessableEntity {
		return fmt.Errorf("the pod is no longer labelled %s=%s (claimed elsewhere?): %w", LabelPool, PoolReady, err)
	}
	return r.apiErr(ctx, "claim: label", err)
}

// seen checks that the pod sees what the slot shows on the host: the
// workspace at /workspace and each hidden name over it. Where this host
// sees the pod's process, its mount table says so (as for Docker: the
// propagated mounts over /workspace, the process still the container's);
// elsewhere one exec compares the device and inode of each in the pod
// with the slot's.
func (p *Pooled) seen(ctx context.Context, hidden []sandbox.Hidden) error {
	if p.pid > 0 {
		if !inCgroup(p.pid, p.cgroup) {
			return errors.New("the pod's process is gone")
		}
		return poolslot.Propagated(p.pid, 1+len(hidden))
	}
	paths := []string{sandbox.Workdir}
	want := []string{}
	for _, h := range hidden {
		paths = append(paths, h.Target)
	}
	for _, pth := range paths {
		id, err := statID(filepath.Join(p.slot.WS(), strings.TrimPrefix(pth, sandbox.Workdir)))
		if err != nil {
			return err
		}
		want = append(want, id)
	}
	got, err := p.sb.stats(ctx, paths)
	if err != nil {
		return err
	}
	for i := range paths {
		if got[i] != want[i] {
			return fmt.Errorf("the pod does not see the workspace's mount at %s (device and inode %s in the pod, %s here)", paths[i], got[i], want[i])
		}
	}
	return nil
}

// Remove deletes the unclaimed pod and its slot. Idempotent.
func (p *Pooled) Remove(ctx context.Context) error {
	p.mu.Lock()
	if p.removed {
		p.mu.Unlock()
		return nil
	}
	p.removed = true
	p.mu.Unlock()
	p.own.Close()
	return p.sb.Remove(ctx)
}
