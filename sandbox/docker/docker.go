// Package docker is the production sandbox runtime: one hardened container
// per request, created through the Docker Engine API (official Go SDK, API
// version negotiated with the engine), commands run through the exec API.
//
// Every engine call has its own short timeout, so a wedged or restarted
// daemon yields an error wrapping sandbox.ErrEngineUnavailable, never a
// hang. Containers carry the sandbox labels (product, instance, user, chat,
// created) and a per-process run id, which the reaper uses to find
// orphans.
package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/agentbox/agentbox/images"
	"github.com/agentbox/agentbox/sandbox"
)

// Name is the runtime's registry name.
const Name = "docker"

// ProductLabelValue is the value of sandbox.LabelProduct on our containers.
const ProductLabelValue = "agentbox"

// Defaults applied when Options and Spec leave a limit at zero.
const (
	DefaultImage       = images.Claude
	DefaultPidsLimit   = 512
	DefaultMemoryBytes = 2 << 30
	DefaultCPUs        = 2.0
	DefaultUser        = "1000:1000"
	DefaultHome        = "/home/agent"
	DefaultCallTimeout = 15 * time.Second
	DefaultTmpfsSize   = 512 << 20
	// DefaultGVisorRuntime is the engine's runtime for sandboxes with
	// sandbox.IsolationGVisor, as scripts/ensure-docker.sh registers it
	// (its host-network twin is DefaultGVisorRuntime + HostNetSuffix).
	DefaultGVisorRuntime = "runsc"
	// DefaultReapGrace is how long a container of another instance may
	// live before the reaper removes it.
	DefaultReapGrace = time.Hour
)

// HostNetSuffix names the engine runtime of a gVisor sandbox with network
// "host": gVisor's own network stack needs a network namespace of its own,
// so the host's network is a runsc of its own (runsc --network=host,
// registered as GVisorRuntime + HostNetSuffix).
const HostNetSuffix = "-hostnet"

// Options configures the runtime. Zero values mean the defaults above.
type Options struct {
	// Instance names the owning server instance; it labels every container.
	// A server restarted under the same name reaps its previous
	// containers. Default: the host name.
	Instance string
	// Host is the engine address (default: DOCKER_HOST, else the local
	// socket).
	Host string
	// Image is used when Spec.Image is empty (default DefaultImage).
	Image string
	// PidsLimit, MemoryBytes and CPUs are the limits used when the Spec
	// leaves them at zero.
	PidsLimit   int64
	MemoryBytes int64
	CPUs        float64
	// Network is the network mode used when Spec.Network is empty
	// (default sandbox.NetworkNone).
	Network string
	// User is the uid:gid commands run as (default 1000:1000, the image's
	// agent user).
	User string
	// Home is the user's home, a tmpfs (default /home/agent).
	Home string
	// TmpfsBytes bounds each of the /tmp and home tmpfs (default 512 MiB).
	TmpfsBytes int64
	// GVisorRuntime is the engine's name of gVisor's runsc, which runs
	// sandboxes with sandbox.IsolationGVisor (default "runsc"); with
	// network "host" they run on GVisorRuntime + HostNetSuffix.
	GVisorRuntime string
	// GVisorReadable are the image's programs a gVisor sandbox runs from
	// readable copies when its user may not read them (nil:
	// DefaultGVisorReadable), made once per image in GVisorCopyDir
	// (default: agentbox-gvisor-bin in the temporary folder).
	GVisorReadable []string
	GVisorCopyDir  string
	// PoolDir is the parent of the folders through which pooled
	// containers (Prestart) get their workspace and sockets (default:
	// DefaultPoolDir). It must be on the file system of the bridge's
	// folder.
	PoolDir string
	// CallTimeout bounds every single engine call (default 15s).
	CallTimeout time.Duration
	// Logger receives reaper reports (default: discard).
	Logger *slog.Logger
}

// Runtime creates Docker sandboxes. It is safe for concurrent use.
type Runtime struct {
	cli  *client.Client
	opts Options
	run  string

	// tracked holds the containers of live sandboxes, which the reaper
	// never touches.
	tracked  *tracker
	reaper   *reaper
	readable *readableCopies

	// sweepOnce sweeps the slots dead processes left, before the first
	// Prestart.
	sweepOnce sync.Once

	mu     sync.Mutex
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ sandbox.Runtime = (*Runtime)(nil)

// New connects to the Docker engine and checks that it answers (a ping
// with a short timeout). A missing or stopped engine is an error wrapping
// sandbox.ErrEngineUnavailable with a hint.
func New(ctx context.Context, opts Options) (*Runtime, error) {
	if opts.Instance == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "agentbox"
		}
		opts.Instance = h
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.PidsLimit == 0 {
		opts.PidsLimit = DefaultPidsLimit
	}
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = DefaultMemoryBytes
	}
	if opts.CPUs == 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.Network == "" {
		opts.Network = sandbox.NetworkNone
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.Home == "" {
		opts.Home = DefaultHome
	}
	if opts.TmpfsBytes == 0 {
		opts.TmpfsBytes = DefaultTmpfsSize
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.GVisorRuntime == "" {
		opts.GVisorRuntime = DefaultGVisorRuntime
	}
	if opts.GVisorReadable == nil {
		opts.GVisorReadable = DefaultGVisorReadable
	}
	if opts.GVisorCopyDir == "" {
		opts.GVisorCopyDir = filepath.Join(os.TempDir(), "agentbox-gvisor-bin")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.PidsLimit < 0, opts.MemoryBytes < 0, opts.CPUs < 0, opts.TmpfsBytes < 0:
		return nil, errors.New("docker: negative limit in options")
	case opts.Network != sandbox.NetworkNone && opts.Network != sandbox.NetworkHost:
		return nil, fmt.Errorf("docker: network %q: want %q or %q", opts.Network, sandbox.NetworkNone, sandbox.NetworkHost)
	}
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	cli, err := client.NewClientWithOpts(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker: client: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, min(opts.CallTimeout, 5*time.Second))
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("docker: engine at %s does not answer (is the Docker daemon installed and running? try `docker version`; set DOCKER_HOST for a remote engine): %w: %w",
			cli.DaemonHost(), sandbox.ErrEngineUnavailable, err)
	}
	r := &Runtime{cli: cli, opts: opts, run: sandbox.NewRunID(), tracked: newTracker(),
		readable: &readableCopies{dir: opts.GVisorCopyDir, keys: map[string]*sync.Mutex{}}}
	r.reaper = &reaper{engine: r, tracked: r.tracked, run: r.run, alive: sandbox.RunAlive, now: time.Now, log: opts.Logger}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Name returns "docker".
func (r *Runtime) Name() string { return Name }

// Instance returns the instance name labelling this runtime's containers.
func (r *Runtime) Instance() string { return r.opts.Instance }

// Client returns the engine client (for tests and diagnostics).
func (r *Runtime) Client() *client.Client { return r.cli }

// Close stops the reaper and closes the engine client. Sandboxes still
// alive are not removed: their owners remove them, or the reaper of the next
// run does. Idempotent.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if cerr := r.cli.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// call gives one engine call its own timeout.
func (r *Runtime) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.opts.CallTimeout)
}

// engineErr wraps an engine call's error with op, marking an engine that
// does not answer (connection refused, the call's own timeout) with
// sandbox.ErrEngineUnavailable; the caller's own cancellation stays as is.
func (r *Runtime) engineErr(parent context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if parent.Err() != nil {
		return fmt.Errorf("docker %s: %w", op, parent.Err())
	}
	if client.IsErrConnectionFailed(err) || errors.Is(err, context.DeadlineExceeded) || isConnErr(err) {
		return fmt.Errorf("docker %s: the engine does not answer (is the Docker daemon running?): %w: %w", op, sandbox.ErrEngineUnavailable, err)
	}
	if cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker %s: %w: %w", op, sandbox.ErrNotFound, err)
	}
	return fmt.Errorf("docker %s: %w", op, err)
}

func isConnErr(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "connection reset") ||
		strings.Contains(s, "broken pipe") || strings.Contains(s, "no such file or directory") && strings.Contains(s, ".sock")
}

// Create starts a hardened container for spec: the workspace at /workspace
// (plus spec.Mounts), its main process idling under an init, ready for
// exec. A failed Create leaves no container behind.
func (r *Runtime) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if spec.Image == "" {
		spec.Image = r.opts.Image
	}
	name := "agentbox-" + randHex(8)
	if err := checkOwner(spec); err != nil {
		return nil, err
	}
	hidden, err := sandbox.PrepareHide(ctx, spec.Workspace, spec.Hide)
	if err != nil {
		return nil, fmt.Errorf("docker create: %w", err)
	}
	cfg, hc, err := r.containerConfig(spec, bindMount(spec.Workspace.Dir(), sandbox.Workdir, false), hidden, name, time.Now())
	if err != nil {
		return nil, err
	}
	created, err := r.start(ctx, name, cfg, hc)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for k, v := range spec.Env {
		env[k] = v
	}
	return &Sandbox{rt: r, id: created, name: name, ws: spec.Workspace, env: env, terms: map[*terminal]struct{}{}}, nil
}

// checkOwner checks the workspace and the user and chat ids of a spec a
// sandbox is made or claimed for.
func checkOwner(spec sandbox.Spec) error {
	if spec.Workspace == nil {
		return errors.New("docker create: spec has no workspace")
	}
	if err := sandbox.ValidateID("user", spec.UserID); err != nil {
		return fmt.Errorf("docker create: %w", err)
	}
	if err := sandbox.ValidateID("chat", spec.ChatID); err != nil {
		return fmt.Errorf("docker create: %w", err)
	}
	return nil
}

// start creates and starts the container name of cfg and hc, and returns
// its id; a failure leaves no container behind.
func (r *Runtime) start(ctx context.Context, name string, cfg *container.Config, hc *container.HostConfig) (string, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return "", fmt.Errorf("docker create: runtime closed: %w", sandbox.ErrEngineUnavailable)
	}
	if hc.Runtime != "" {
		ms, err := r.readableMounts(ctx, cfg.Image, r.opts.GVisorReadable)
		if err != nil {
			return "", err
		}
		for _, m := range ms {
			hc.Mounts = append(hc.Mounts, bindMount(m.Source, m.Target, true))
		}
	}
	r.tracked.add(name)
	cctx, cancel := r.call(ctx)
	created, err := r.cli.ContainerCreate(cctx, cfg, hc, nil, nil, name)
	cancel()
	if err != nil {
		// The engine may have created it before the error (timeout).
		_ = r.remove(ctx, name)
		r.tracked.drop(name)
		if cerrdefs.IsNotFound(err) && ctx.Err() == nil {
			return "", fmt.Errorf("docker create: image %q is not on this engine (agentbox never pulls; build or load it, e.g. `make image`): %w", cfg.Image, err)
		}
		if err := missingRuntime(ctx, "create", hc, err); err != nil {
			return "", err
		}
		return "", r.engineErr(ctx, "create", err)
	}
	sctx, cancel := r.call(ctx)
	err = r.cli.ContainerStart(sctx, created.ID, container.StartOptions{})
	cancel()
	if err != nil {
		_ = r.remove(ctx, created.ID)
		r.tracked.drop(name)
		if err := missingRuntime(ctx, "start", hc, err); err != nil {
			return "", err
		}
		return "", r.engineErr(ctx, "start", err)
	}
	return created.ID, nil
}

// GVisorHostPids is the host's pids limit of a gVisor sandbox whose agent
// may run pids processes. runsc puts the limit on the host cgroup of its
// Sentry, where each process of the agent is a stub process with its
// threads (systrap: about three host tasks), beside some thirty threads
// of the Sentry's own: the agent gets about the processes it was given,
// and the host stays bounded. Past it the Sentry cannot start a thread
// and the whole sandbox stops, where runc fails the one fork.
func GVisorHostPids(pids int64) int64 { return 3*pids + 64 }

// missingRuntime explains an engine that refused a container for its
// runtime (gVisor not registered: engines before 23 refuse the create,
// later ones the start), and returns nil for every other error.
func missingRuntime(ctx context.Context, op string, hc *container.HostConfig, err error) error {
	// Docker 20.10: "Unknown runtime specified NAME"; 23 and later:
	// "unknown or invalid runtime name: NAME".
	msg := strings.ToLower(err.Error())
	if hc.Runtime == "" || ctx.Err() != nil ||
		!strings.Contains(msg, "unknown runtime specified") && !strings.Contains(msg, "unknown or invalid runtime name") {
		return nil
	}
	return fmt.Errorf("docker %s: the engine has no runtime %q for isolation %q (install gVisor and register it with the engine: scripts/ensure-docker.sh does both; see docs/isolation.md): %w: %w",
		op, hc.Runtime, sandbox.IsolationGVisor, sandbox.ErrIsolation, err)
}

// containerConfig builds the container's configuration: the one place that
// decides how a sandbox is confined, whether it is made for a chat
// (Create, the workspace bound) or ahead of demand (Prestart, the
// workspace's slot bound). Hardening: an init process (reaps
// zombies, forwards signals), the non-root user, all capabilities dropped,
// no-new-privileges, a pids limit, memory with swap equal to it (no swap),
// a cpu limit, a read-only root with tmpfs /tmp and home, the network mode
// (none by default), never privileged, and nothing of the host mounted but
// the workspace and the spec's mounts (read-only unless marked writable),
// the workspace's hidden names (spec.Hide, as sandbox.PrepareHide found
// them) empty and read-only.
// With sandbox.IsolationGVisor the same container runs on gVisor's runsc
// (Options.GVisorRuntime), which applies every one of these inside its
// own kernel and keeps the host's behind it.
func (r *Runtime) containerConfig(spec sandbox.Spec, workspace mount.Mount, hidden []sandbox.Hidden, name string, now time.Time) (*container.Config, *container.HostConfig, error) {
	if spec.Image == "" {
		return nil, nil, errors.New("docker create: no image (set the assistant's sandbox.image or the runtime's default image)")
	}
	network := spec.Network
	if network == "" {
		network = r.opts.Network
	}
	if network != sandbox.NetworkNone && network != sandbox.NetworkHost {
		return nil, nil, fmt.Errorf("docker create: network %q: want %q or %q", network, sandbox.NetworkNone, sandbox.NetworkHost)
	}
	isolation, err := sandbox.CheckIsolation(Name, spec.Isolation, sandbox.IsolationRunc, sandbox.IsolationGVisor)
	if err != nil {
		if spec.Isolation == sandbox.IsolationKata {
			err = fmt.Errorf("%w; use the kubernetes runtime on a cluster with a Kata RuntimeClass", err)
		}
		return nil, nil, fmt.Errorf("docker create: %w", err)
	}
	mem, cpus, pids := spec.MemoryBytes, spec.CPUs, spec.PidsLimit
	if mem == 0 {
		mem = r.opts.MemoryBytes
	}
	if cpus == 0 {
		cpus = r.opts.CPUs
	}
	if pids == 0 {
		pids = r.opts.PidsLimit
	}
	switch {
	case mem < 0, cpus < 0, pids < 0:
		return nil, nil, errors.New("docker create: negative limit")
	case mem > 0 && mem < 6<<20:
		return nil, nil, fmt.Errorf("docker create: memory %d bytes is below Docker's minimum of 6 MiB", mem)
	}
	mounts, err := sandbox.CheckMounts(spec.Mounts)
	if err != nil {
		return nil, nil, fmt.Errorf("docker create: %w", err)
	}
	env, err := sandbox.MergeEnv(map[string]string{"HOME": r.opts.Home}, spec.Env)
	if err != nil {
		return nil, nil, fmt.Errorf("docker create: %w", err)
	}

	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	labels[sandbox.LabelProduct] = ProductLabelValue
	labels[sandbox.LabelInstance] = r.opts.Instance
	labels[sandbox.LabelUser] = spec.UserID
	labels[sandbox.LabelChat] = spec.ChatID
	labels[sandbox.LabelCreated] = now.UTC().Format(time.RFC3339)
	labels[sandbox.LabelIsolation] = isolation
	labels[LabelRun] = r.run

	uid, gid, _ := strings.Cut(r.opts.User, ":")
	if gid == "" {
		gid = uid
	}
	// exec: Docker mounts a tmpfs noexec unless told otherwise, and the
	// agent's tools run programs from there (go run and go test build into
	// /tmp; pip --user and npx put programs in the home). noexec would
	// not contain the agent anyway: /workspace is executable.
	tmpfsOpts := fmt.Sprintf("rw,exec,nosuid,nodev,size=%d", r.opts.TmpfsBytes)
	cfg := &container.Config{
		Image:      spec.Image,
		User:       r.opts.User,
		Hostname:   "agentbox",
		Env:        env,
		WorkingDir: sandbox.Workdir,
		// The main process only idles: commands run through the exec API.
		Entrypoint: []string{"sleep", "infinity"},
		Labels:     labels,
	}
	init := true
	pidsLimit := pids
	hc := &container.HostConfig{
		Init:           &init,
		Privileged:     false,
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		NetworkMode:    container.NetworkMode(network),
		IpcMode:        "private",
		Tmpfs: map[string]string{
			"/tmp":      tmpfsOpts,
			r.opts.Home: fmt.Sprintf("%s,uid=%s,gid=%s,mode=0755", tmpfsOpts, uid, gid),
		},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem,
			NanoCPUs:   int64(cpus * 1e9),
			PidsLimit:  &pidsLimit,
		},
		// The idle main process writes nothing; exec output goes through
		// the attach streams.
		LogConfig: container.LogConfig{Type: "none"},
	}
	if isolation == sandbox.IsolationGVisor {
		hc.Runtime = r.opts.GVisorRuntime
		if network == sandbox.NetworkHost {
			hc.Runtime += HostNetSuffix
		}
		pidsLimit = GVisorHostPids(pids)
	}
	hc.Mounts = append(hc.Mounts, workspace)
	for _, m := range mounts {
		hc.Mounts = append(hc.Mounts, bindMount(m.Source, m.Target, !m.Writable))
	}
	// Hidden names: an empty read-only tmpfs over a folder, an empty file
	// bound read-only over a file (Docker mounts the workspace, their
	// parent, first).
	for _, h := range hidden {
		if h.Folder {
			hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeTmpfs, Target: h.Target, ReadOnly: true,
				TmpfsOptions: &mount.TmpfsOptions{SizeBytes: 4096, Mode: 0o555}})
			continue
		}
		empty, err := sandbox.EmptyFile()
		if err != nil {
			return nil, nil, fmt.Errorf("docker create: %w", err)
		}
		hc.Mounts = append(hc.Mounts, bindMount(empty, h.Target, true))
	}
	return cfg, hc, nil
}

// Reap removes our labelled containers that no live request owns
// (pooled ones too, and the slots of those whose process is gone):
// containers of this instance made by an earlier run (the server
// restarted), containers of this run it does not track (a failed cleanup),
// and containers of other instances older than opts.Grace (default
// DefaultReapGrace). With DryRun it only reports. It returns the names of
// the containers removed (or that would be), sorted.
func (r *Runtime) Reap(ctx context.Context, opts ReapOptions) ([]string, error) {
	reaped, err := r.reaper.reap(ctx, opts)
	if !opts.DryRun {
		// The slots of pooled containers whose process is gone hold
		// workspaces' mounts on the host.
		r.sweepSlots()
	}
	return reaped, err
}

// StartReaper reaps now and then every interval (0: one minute) until
// Close, logging what it removed. Containers of other instances are reaped
// after DefaultReapGrace.
func (r *Runtime) StartReaper(interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.sweepOnce.Do(r.sweepSlots)
		r.reaper.loop(r.ctx, interval)
	}()
}

// labelled lists every container with our product label (reapEngine).
func (r *Runtime) labelled(ctx context.Context) ([]container.Summary, error) {
	lctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.cli.ContainerList(lctx, container.ListOptions{
		All:     true,
		Filters: filters.NewArgs(filters.Arg("label", sandbox.LabelProduct+"="+ProductLabelValue)),
	})
	if err != nil {
		return nil, r.engineErr(ctx, "reap: list", err)
	}
	return list, nil
}

// remove force-removes a container; NotFound counts as done. It runs with
// its own timeout even when ctx has already ended.
func (r *Runtime) remove(ctx context.Context, id string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.CallTimeout)
	defer cancel()
	err := r.cli.ContainerRemove(rctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	switch {
	case err == nil, cerrdefs.IsNotFound(err):
		return nil
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "in progress"):
		// Another remover is at it: wait for it to finish.
		for rctx.Err() == nil {
			if _, err := r.cli.ContainerInspect(rctx, id); cerrdefs.IsNotFound(err) {
				return nil
			}
			select {
			case <-rctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		return fmt.Errorf("docker remove %s: still being removed after %s: %w", id, r.opts.CallTimeout, sandbox.ErrEngineUnavailable)
	}
	return r.engineErr(context.WithoutCancel(ctx), "remove", err)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
