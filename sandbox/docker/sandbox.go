package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/agentbox/agentbox/sandbox"
)

func bindMount(src, dst string, readOnly bool) mount.Mount {
	return mount.Mount{Type: mount.TypeBind, Source: src, Target: dst, ReadOnly: readOnly,
		BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}}
}

// Sandbox is one live container. It is safe for concurrent use.
type Sandbox struct {
	rt   *Runtime
	id   string
	name string
	ws   *sandbox.Workspace
	env  map[string]string
	// release gives back what the sandbox holds beside its container
	// once that is gone (a claimed pooled container's slot; nil: none).
	release func() error
	// unclaimed: a pooled container before its claim (Pooled.Unclaimed),
	// which the Pooled removes.
	unclaimed bool

	procs sandbox.Procs

	mu      sync.Mutex
	removed bool
	terms   map[*terminal]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID returns the container id.
func (s *Sandbox) ID() string { return s.id }

// Name returns the container name.
func (s *Sandbox) Name() string { return s.name }

// Workspace returns the mounted workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.ws }

// Exec runs req to completion as sandbox.Sandbox says, in an exec of the
// container; a timeout kills the exec's process group (execWrapper).
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	return sandbox.ExecWith(ctx, s.ws, s.env, req, s.start)
}

// Start runs req in an exec of the container and streams its output (see
// sandbox.Procs.Start); stdin, when set, goes over the attach connection,
// which is half-closed at its end.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	return sandbox.StartWith(ctx, s.ws, s.env, req, s.start)
}

// execWrapper records the exec's pid, which is its process group and
// session (the engine starts each exec as a session leader), before it
// becomes the command: Docker has no API to kill an exec, so a timeout
// kills the group through a second exec (sandbox.KillGroupScript).
const execWrapper = `echo $$ > "$0" 2>/dev/null; exec "$@"`

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.isRemoved() {
		return nil, fmt.Errorf("exec in %s: %w", s.name, sandbox.ErrRemoved)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := s.rt
	pidfile := "/tmp/.agentbox-exec-" + randHex(8)
	argv := append([]string{"/bin/sh", "-c", execWrapper, pidfile}, cmd.Argv...)
	cctx, cancel := r.call(ctx)
	created, err := r.cli.ContainerExecCreate(cctx, s.id, container.ExecOptions{
		Cmd:          argv,
		Env:          cmd.Env,
		WorkingDir:   cmd.Dir,
		AttachStdin:  req.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	cancel()
	if err != nil {
		return nil, s.execErr(ctx, "exec create", err)
	}
	return s.procs.Start(ctx, req.Timeout, func(stdout, stderr io.Writer) (sandbox.Execution, error) {
		actx, cancel := r.call(ctx)
		conn, err := r.cli.ContainerExecAttach(actx, created.ID, container.ExecAttachOptions{})
		cancel()
		if err != nil {
			return nil, s.execErr(ctx, "exec start", err)
		}
		if req.Stdin != nil {
			go func() {
				_, _ = io.Copy(conn.Conn, req.Stdin)
				_ = conn.CloseWrite()
			}()
		}
		return &execution{sb: s, execID: created.ID, pidfile: pidfile, conn: conn, stdout: stdout, stderr: stderr}, nil
	})
}

func (s *Sandbox) isRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// execErr reports an exec call's failure, naming a removed sandbox as such.
func (s *Sandbox) execErr(ctx context.Context, op string, err error) error {
	if s.isRemoved() || cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s in %s: %w", op, s.name, sandbox.ErrRemoved)
	}
	why, stopped := s.whyGone(ctx)
	if cerrdefs.IsConflict(err) || stopped { // container not running
		return fmt.Errorf("%s in %s: the container is not running (%s; %w): %w", op, s.name, why, err, sandbox.ErrRemoved)
	}
	return s.rt.engineErr(ctx, op, err)
}

// Remove kills every process and removes the container. Idempotent: a
// container already gone counts as removed. It runs with its own timeout
// even when ctx has ended (request cancelled), so cleanup always happens.
func (s *Sandbox) Remove(ctx context.Context) error {
	if s.unclaimed {
		return nil
	}
	s.mu.Lock()
	s.removed = true
	terms := make([]*terminal, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	s.mu.Unlock()
	err := s.rt.remove(ctx, s.id)
	if err == nil {
		s.rt.tracked.drop(s.name)
	}
	if s.release != nil {
		// Also when the container could not be removed: the workspace's
		// mounts on the host go, so that it can be released.
		err = errors.Join(err, s.release())
	}
	// The streams end with the container; make sure (a loaded engine may
	// take its time to close an exec's stream, runsc's TTY execs most).
	for _, p := range s.procs.All() {
		p.Cut()
	}
	for _, t := range terms {
		t.conn.Close()
	}
	return err
}

// execNotStarted is the engine's exit code of an exec whose process the
// runtime could not start (the runtime's message is its output). The
// command's own 126 (found but not executable) comes from the wrapper's
// shell, which has a pid.
const execNotStarted = 126

// notStarted explains an exec the runtime could not start although the
// engine took it: the container died under it (whyGone).
func (s *Sandbox) notStarted(ctx context.Context) error {
	why, _ := s.whyGone(ctx)
	return fmt.Errorf("exec in %s: the runtime could not start the command, the sandbox is gone (%s): %w", s.name, why, sandbox.ErrRemoved)
}

// whyGone says why the container stopped, as far as the engine knows,
// and whether the engine has it stopped (false: running, or the engine
// did not answer). Under gVisor a container that stops by itself is
// typically the whole sandbox taken by the host's OOM killer at the
// memory limit, which the engine may not record as such, nor notice at
// once (docs/isolation.md).
func (s *Sandbox) whyGone(ctx context.Context) (string, bool) {
	ictx, cancel := s.rt.call(ctx)
	ins, err := s.rt.cli.ContainerInspect(ictx, s.id)
	cancel()
	if err != nil || ins.State == nil || ins.HostConfig == nil {
		return "it has stopped", false
	}
	stopped := !ins.State.Running
	switch {
	case ins.State.OOMKilled:
		return fmt.Sprintf("the host's OOM killer stopped it at its memory limit of %d MiB", ins.HostConfig.Memory>>20), stopped
	case !ins.State.Paused && ins.HostConfig.Memory > 0 && strings.HasPrefix(ins.HostConfig.Runtime, s.rt.opts.GVisorRuntime):
		return fmt.Sprintf("it has stopped; under gVisor a program past the memory limit of %d MiB can take the whole sandbox with it", ins.HostConfig.Memory>>20), stopped
	case !stopped: // paused or restarting
		return "it is " + ins.State.Status, false
	}
	return "it has stopped", true
}

// execution is one exec started by Start: its output comes over the
// attach connection, multiplexed (stdcopy).
type execution struct {
	sb      *Sandbox
	execID  string
	pidfile string
	conn    types.HijackedResponse
	stdout  io.Writer
	stderr  io.Writer

	closeOnce sync.Once
}

var _ sandbox.Execution = (*execution)(nil)

// Stream demultiplexes the attach stream into stdout and stderr until EOF.
func (e *execution) Stream() (int, error) {
	_, err := stdcopy.StdCopy(e.stdout, e.stderr, e.conn.Reader)
	e.Cut()
	if err != nil && !errors.Is(err, io.EOF) {
		return -1, err
	}
	return 0, nil
}

// Exit reads the exit code from the engine: the attach stream is drained
// to EOF, but the exec may still show as running for a moment.
func (e *execution) Exit(ctx context.Context, _ int, streamErr error, _ bool) (int, error) {
	r := e.sb.rt
	deadline := time.Now().Add(r.opts.CallTimeout)
	for {
		ictx, cancel := r.call(ctx)
		ins, err := r.cli.ContainerExecInspect(ictx, e.execID)
		cancel()
		if err != nil {
			return -1, e.sb.execErr(ctx, "exec inspect", err)
		}
		if !ins.Running {
			if streamErr != nil && ins.ExitCode == 0 {
				return -1, fmt.Errorf("exec output: %w", streamErr)
			}
			if ins.ExitCode == execNotStarted && ins.Pid == 0 {
				return -1, e.sb.notStarted(ctx)
			}
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("exec inspect: output ended but the command still runs after %s", r.opts.CallTimeout)
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Kill kills the exec's process group through a second exec.
func (e *execution) Kill() error {
	if e.sb.isRemoved() {
		return sandbox.ErrRemoved
	}
	return e.sb.killGroup(e.pidfile)
}

// Cut ends the attach connection, which ends the output streams.
func (e *execution) Cut() {
	e.closeOnce.Do(func() { e.conn.Close() })
}

// killGroup kills the process group and session of the exec whose
// wrapper wrote its pid to pidfile, through a second exec
// (sandbox.KillGroupScript).
func (s *Sandbox) killGroup(pidfile string) error {
	r := s.rt
	// Within the call's time and the runtime's life: the kill's own
	// stream (read below) ends with them, however slow the engine is to
	// close it.
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.CallTimeout)
	defer cancel()
	created, err := r.cli.ContainerExecCreate(ctx, s.id, container.ExecOptions{
		Cmd:          []string{"/bin/sh", "-c", sandbox.KillGroupScript, pidfile},
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return s.execErr(ctx, "kill", err)
	}
	conn, err := r.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return s.execErr(ctx, "kill", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, conn.Close)
	defer stop()
	_, _ = io.Copy(io.Discard, conn.Reader)
	ins, err := r.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return s.execErr(ctx, "kill", err)
	}
	if ins.ExitCode != 0 {
		return fmt.Errorf("kill: the command's process group was not found (exit %d)", ins.ExitCode)
	}
	return nil
}

// MemoryUsage is the container's memory use now, as `docker stats` shows
// it: the cgroup's usage less its inactive page cache.
func (s *Sandbox) MemoryUsage(ctx context.Context) (int64, error) {
	cctx, cancel := s.rt.call(ctx)
	defer cancel()
	resp, err := s.rt.cli.ContainerStatsOneShot(cctx, s.id)
	if err != nil {
		return 0, s.execErr(ctx, "stats", err)
	}
	defer resp.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return 0, fmt.Errorf("docker stats %s: %w", s.name, err)
	}
	use := st.MemoryStats.Usage
	for _, k := range []string{"inactive_file", "total_inactive_file"} {
		if v, ok := st.MemoryStats.Stats[k]; ok && v < use {
			use -= v
			break
		}
	}
	return int64(use), nil
}

var _ sandbox.Freezer = (*Sandbox)(nil)

// Freeze pauses the container (docker pause: the cgroup freezer). A
// pause whose answer was lost (the call timed out, the engine paused it
// anyway) is a pause: the container's state says.
func (s *Sandbox) Freeze(ctx context.Context) error {
	cctx, cancel := s.rt.call(ctx)
	defer cancel()
	if err := s.rt.cli.ContainerPause(cctx, s.id); err != nil {
		if paused, ok := s.paused(); ok && paused {
			return nil
		}
		return s.execErr(ctx, "pause", err)
	}
	return nil
}

// Thaw unpauses the container; one that is not paused (an unpause whose
// answer was lost) is thawed.
func (s *Sandbox) Thaw(ctx context.Context) error {
	cctx, cancel := s.rt.call(ctx)
	defer cancel()
	if err := s.rt.cli.ContainerUnpause(cctx, s.id); err != nil {
		if paused, ok := s.paused(); ok && !paused {
			return nil
		}
		return s.execErr(ctx, "unpause", err)
	}
	return nil
}

// paused reports whether the engine has the container paused (ok false
// when it cannot tell: it does not answer, or the container is gone or
// not running).
func (s *Sandbox) paused() (paused, ok bool) {
	ctx, cancel := s.rt.call(context.Background())
	defer cancel()
	info, err := s.rt.cli.ContainerInspect(ctx, s.id)
	if err != nil || info.State == nil || !info.State.Running {
		return false, false
	}
	return info.State.Paused, true
}
