package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
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

	mu      sync.Mutex
	removed bool
	procs   map[*process]struct{}
	terms   map[*terminal]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID returns the container id.
func (s *Sandbox) ID() string { return s.id }

// Name returns the container name.
func (s *Sandbox) Name() string { return s.name }

// Workspace returns the mounted workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.ws }

// Exec runs req to completion. A non-zero exit is not an error; a timeout
// returns the output so far and an error wrapping sandbox.ErrExecTimeout
// after killing the command's whole process group.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	start := time.Now()
	cmd, err := sandbox.ResolveExec(ctx, s.ws, nil, req)
	if err != nil {
		return nil, err
	}
	p, err := s.start(ctx, cmd, req)
	if err != nil {
		return nil, err
	}
	return sandbox.Collect(ctx, p, req.MaxOutput, cmd, start)
}

// Start runs req and streams its output as it is produced. Stdout holds up
// to 1 MiB unread before the command is held back; stderr never holds it
// back (beyond 1 MiB unread, its oldest bytes are dropped). Stdin, when
// set, is copied to the command and then closed when it reaches EOF. When
// ctx ends, the command's process group is killed.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	cmd, err := sandbox.ResolveExec(ctx, s.ws, nil, req)
	if err != nil {
		return nil, err
	}
	return s.start(ctx, cmd, req)
}

// execWrapper records the exec's pid, which is its process group and
// session (the engine starts each exec as a session leader), before it
// becomes the command: Docker has no API to kill an exec, so a timeout
// kills the group through a second exec (sandbox.KillGroupScript).
const execWrapper = `echo $$ > "$0" 2>/dev/null; exec "$@"`

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (*process, error) {
	s.mu.Lock()
	removed := s.removed
	s.mu.Unlock()
	if removed {
		return nil, fmt.Errorf("exec in %s: %w", s.name, sandbox.ErrRemoved)
	}
	env, err := sandbox.MergeEnv(s.env, req.Env)
	if err != nil {
		return nil, fmt.Errorf("exec: %w", err)
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
		Env:          env,
		WorkingDir:   cmd.Dir,
		AttachStdin:  req.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	cancel()
	if err != nil {
		return nil, s.execErr(ctx, "exec create", err)
	}
	actx, cancel := r.call(ctx)
	conn, err := r.cli.ContainerExecAttach(actx, created.ID, container.ExecAttachOptions{})
	cancel()
	if err != nil {
		return nil, s.execErr(ctx, "exec start", err)
	}
	p := &process{
		sb:      s,
		execID:  created.ID,
		pidfile: pidfile,
		conn:    conn,
		stdout:  sandbox.NewStream(1<<20, true),
		stderr:  sandbox.NewStream(1<<20, false),
		done:    make(chan struct{}),
		timeout: req.Timeout,
	}
	s.mu.Lock()
	s.procs[p] = struct{}{}
	s.mu.Unlock()
	go p.pump()
	if req.Stdin != nil {
		go func() {
			_, _ = io.Copy(conn.Conn, req.Stdin)
			_ = conn.CloseWrite()
		}()
	}
	if req.Timeout > 0 {
		p.timer = time.AfterFunc(req.Timeout, func() {
			p.timedOut.Store(true)
			p.abort()
		})
	}
	p.stopCtx = context.AfterFunc(ctx, p.abort)
	return p, nil
}

// execErr reports an exec call's failure, naming a removed sandbox as such.
func (s *Sandbox) execErr(ctx context.Context, op string, err error) error {
	s.mu.Lock()
	removed := s.removed
	s.mu.Unlock()
	if removed || cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s in %s: %w", op, s.name, sandbox.ErrRemoved)
	}
	if cerrdefs.IsConflict(err) { // container not running
		return fmt.Errorf("%s in %s: the container is not running (%w): %w", op, s.name, err, sandbox.ErrRemoved)
	}
	return s.rt.engineErr(ctx, op, err)
}

// Remove kills every process and removes the container. Idempotent: a
// container already gone counts as removed. It runs with its own timeout
// even when ctx has ended (request cancelled), so cleanup always happens.
func (s *Sandbox) Remove(ctx context.Context) error {
	s.mu.Lock()
	s.removed = true
	procs := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	terms := make([]*terminal, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	s.mu.Unlock()
	err := s.rt.remove(ctx, s.id)
	if err == nil {
		s.rt.tracked.drop(s.name)
	}
	// The streams end with the container; make sure (a loaded engine may
	// take its time to close an exec's stream, runsc's TTY execs most).
	for _, p := range procs {
		p.close()
	}
	for _, t := range terms {
		t.conn.Close()
	}
	return err
}

// process is one exec started by Start.
type process struct {
	sb      *Sandbox
	execID  string
	pidfile string
	conn    types.HijackedResponse
	stdout  *sandbox.Stream
	stderr  *sandbox.Stream
	done    chan struct{}
	pumpErr error

	timeout  time.Duration
	timer    *time.Timer
	timedOut atomic.Bool
	stopCtx  func() bool

	killOnce  sync.Once
	killErr   error
	closeOnce sync.Once
}

var _ sandbox.Process = (*process)(nil)

// pump demultiplexes the attach stream into stdout and stderr until EOF.
func (p *process) pump() {
	_, err := stdcopy.StdCopy(p.stdout, p.stderr, p.conn.Reader)
	if err != nil && !errors.Is(err, io.EOF) {
		p.pumpErr = err
	}
	p.stdout.Close()
	p.stderr.Close()
	close(p.done)
}

func (p *process) Stdout() io.Reader { return p.stdout }
func (p *process) Stderr() io.Reader { return p.stderr }

// Wait waits for the exec to end and returns its exit code.
func (p *process) Wait(ctx context.Context) (int, error) {
	defer p.release()
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = p.Kill()
		p.waitDone(2 * time.Second)
		return -1, ctx.Err()
	}
	if p.timedOut.Load() {
		return -1, sandbox.TimeoutError(p.timeout)
	}
	r := p.sb.rt
	// The attach stream is drained to EOF; the exec may still show as
	// running for a moment.
	deadline := time.Now().Add(r.opts.CallTimeout)
	for {
		ictx, cancel := r.call(ctx)
		ins, err := r.cli.ContainerExecInspect(ictx, p.execID)
		cancel()
		if err != nil {
			return -1, p.sb.execErr(ctx, "exec inspect", err)
		}
		if !ins.Running {
			if p.pumpErr != nil && ins.ExitCode == 0 {
				return -1, fmt.Errorf("exec output: %w", p.pumpErr)
			}
			if p.timedOut.Load() {
				return -1, sandbox.TimeoutError(p.timeout)
			}
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("exec inspect: output ended but the command still runs after %s", r.opts.CallTimeout)
		}
		select {
		case <-ctx.Done():
			_ = p.Kill()
			return -1, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// abort kills the command and, should its output not end soon after
// (a process that left the group still holds it), cuts the connection.
func (p *process) abort() {
	_ = p.Kill()
	p.waitDone(2 * time.Second)
}

// waitDone waits up to d for the output to end, then cuts the connection.
func (p *process) waitDone(d time.Duration) {
	select {
	case <-p.done:
	case <-time.After(d):
		p.close()
		<-p.done
	}
}

// Kill kills the exec's process group through a second exec. Idempotent.
func (p *process) Kill() error {
	p.killOnce.Do(func() {
		select {
		case <-p.done:
			return // already over
		default:
		}
		p.sb.mu.Lock()
		removed := p.sb.removed
		p.sb.mu.Unlock()
		if removed {
			p.close()
			return
		}
		p.killErr = p.kill()
		if p.killErr != nil {
			// Cut the stream at least: the container's removal ends the rest.
			p.close()
		}
	})
	return p.killErr
}

func (p *process) kill() error { return p.sb.killGroup(p.pidfile) }

// killGroup kills the process group and session of the exec whose
// wrapper wrote its pid to pidfile, through a second exec
// (sandbox.KillGroupScript).
func (s *Sandbox) killGroup(pidfile string) error {
	r := s.rt
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.CallTimeout)
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

// close ends the attach connection, which ends the output streams.
func (p *process) close() {
	p.closeOnce.Do(func() { p.conn.Close() })
}

// release frees what the process holds once Wait returns.
func (p *process) release() {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.stopCtx != nil {
		p.stopCtx()
	}
	p.sb.mu.Lock()
	delete(p.sb.procs, p)
	p.sb.mu.Unlock()
	select {
	case <-p.done:
		p.close()
	default:
	}
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
