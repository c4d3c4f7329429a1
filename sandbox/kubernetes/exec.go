package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/agentbox/agentbox/sandbox"
)

// How a command runs in a pod. The exec API takes argv alone: no
// environment, no working directory, and it puts argv in the request's URL,
// which API servers log and audit. So every exec runs one fixed script,
// execWrapper, and sends it the command on stdin first (a preamble), then
// the request's stdin:
//
//	P 1\n<pid file>\n  D 1\n<dir>\n  E n\n<KEY=value, n lines>\n  A n\n<arg>\n ... I 1\n\n  .\n
//
// Each record is a tag and its value's line count, then the value's lines
// (values may hold newlines; NUL bytes were refused earlier). The shell's
// read builtin reads a pipe byte by byte, so nothing past the preamble is
// consumed. The wrapper writes its pid to the pid file (a timeout or Kill
// kills the process group through a second exec, as on Docker: there is
// no API to kill an exec), changes to the working directory, closes stdin
// unless the request has some (I), drops the variables Kubernetes puts in
// every container (the API server's address), and becomes env(1) with the
// environment and argv. Secrets in the environment thus never reach the
// pod object, a URL or a log.
const execWrapper = unsetKubernetes + preambleLoop + `[ -n "$in" ] || exec </dev/null
exec env -- "$@"`

// unsetKubernetes drops the variables Kubernetes puts in every container.
const unsetKubernetes = `unset KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT KUBERNETES_SERVICE_PORT_HTTPS KUBERNETES_PORT KUBERNETES_PORT_443_TCP KUBERNETES_PORT_443_TCP_PROTO KUBERNETES_PORT_443_TCP_PORT KUBERNETES_PORT_443_TCP_ADDR
`

// preambleLoop reads the preamble from stdin into the positional
// parameters (the environment, then argv), writing the pid file, changing
// directory and noting whether the command takes stdin (in).
const preambleLoop = `set --; in=
while IFS= read -r h; do
	[ "$h" = . ] && break
	n=${h#? }; v=; i=0
	while [ "$i" -lt "$n" ]; do
		IFS= read -r l || exit 125
		if [ "$i" = 0 ]; then v=$l; else v="$v
$l"; fi
		i=$((i+1))
	done
	case $h in
	P*) echo $$ >"$v" ;;
	D*) cd "$v" || exit 125 ;;
	I*) in=1 ;;
	*) set -- "$@" "$v" ;;
	esac
done
`

// preamble encodes what execWrapper reads before the command's stdin.
// env(1) takes every leading argument holding '=' for a variable (after
// "--", which ends its options: a program may start with '-'), so a
// program whose name holds one is started through the shell.
func preamble(pidfile, dir string, env, argv []string, stdin bool) []byte {
	var b bytes.Buffer
	rec := func(tag byte, v string) {
		b.WriteByte(tag)
		b.WriteByte(' ')
		b.WriteString(strconv.Itoa(strings.Count(v, "\n") + 1))
		b.WriteByte('\n')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	rec('P', pidfile)
	rec('D', dir)
	for _, e := range env {
		rec('E', e)
	}
	if strings.Contains(argv[0], "=") {
		argv = append([]string{sandbox.Shell, "-c", `exec "$0" "$@"`}, argv...)
	}
	for _, a := range argv {
		rec('A', a)
	}
	if stdin {
		rec('I', "")
	}
	b.WriteString(".\n")
	return b.Bytes()
}

// execErr explains an exec that failed as such (not the command's exit):
// a pod whose container no longer runs (its main process died, it was
// evicted or deleted) is sandbox.ErrRemoved.
func (s *Sandbox) execErr(err error) error {
	if pod := s.rt.pods.get(s.name); pod == nil || !running(pod) {
		state := "deleted"
		if pod != nil {
			state = podState(pod)
		}
		return fmt.Errorf("exec in %s: the pod no longer runs (%s): %w: %w", s.name, state, sandbox.ErrRemoved, err)
	}
	return s.rt.apiErr(context.Background(), "exec in "+s.name, err)
}

// Exec runs req to completion as sandbox.Sandbox says, through the pod's
// exec API and execWrapper, which kills the process group on a timeout.
func (s *Sandbox) Exec(ctx context.Context, req sandbox.ExecRequest) (*sandbox.ExecResult, error) {
	return sandbox.ExecWith(ctx, s.ws, s.env, req, s.start)
}

// Start runs req through the pod's exec API and streams its output (see
// sandbox.Procs.Start); stdin, when set, follows the preamble on the exec's
// stdin.
func (s *Sandbox) Start(ctx context.Context, req sandbox.ExecRequest) (sandbox.Process, error) {
	return sandbox.StartWith(ctx, s.ws, s.env, req, s.start)
}

func (s *Sandbox) start(ctx context.Context, cmd sandbox.Command, req sandbox.ExecRequest) (sandbox.Process, error) {
	if s.isRemoved() || s.rt.pods.isGone(s.name) {
		return nil, fmt.Errorf("exec in %s: %w", s.name, sandbox.ErrRemoved)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ex, err := s.rt.executor(s.name, []string{sandbox.Shell, "-c", execWrapper}, true, false)
	if err != nil {
		return nil, err
	}
	pidfile := "/tmp/.agentbox-exec-" + randHex(8)
	stdin := io.Reader(bytes.NewReader(preamble(pidfile, cmd.Dir, cmd.Env, cmd.Argv, req.Stdin != nil)))
	if req.Stdin != nil {
		stdin = io.MultiReader(stdin, req.Stdin)
	}
	return s.procs.Start(ctx, req.Timeout, func(stdout, stderr io.Writer) (sandbox.Execution, error) {
		sctx, cut := context.WithCancel(context.Background())
		return &execution{sb: s, ex: ex, ctx: sctx, cut: cut, pidfile: pidfile,
			opts: remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr}}, nil
	})
}

// executor prepares an exec of argv in the pod's sandbox container over
// WebSocket, falling back to SPDY for API servers (or proxies) that do not
// upgrade to it, as kubectl does.
func (r *Runtime) executor(pod string, argv []string, stdin, tty bool) (remotecommand.Executor, error) {
	u := r.api.execURL(pod, &corev1.PodExecOptions{
		Container: containerName,
		Command:   argv,
		Stdin:     stdin,
		Stdout:    true,
		Stderr:    !tty, // a terminal's errors are on its output
		TTY:       tty,
	})
	ws, err := remotecommand.NewWebSocketExecutor(r.cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("kubernetes exec: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(r.cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("kubernetes exec: %w", err)
	}
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes exec: %w", err)
	}
	return ex, nil
}

// run1 runs a short command of the runtime's own (no preamble) with
// stdin (nil: none) and returns its output; a non-zero exit is an error.
func (r *Runtime) run1(ctx context.Context, pod string, argv []string, stdin io.Reader) (string, error) {
	ex, err := r.executor(pod, argv, stdin != nil, false)
	if err != nil {
		return "", err
	}
	var out, errb bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &out, Stderr: &errb})
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w (%s)", argv[len(argv)-1], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// killGroup kills the process group and session of the exec whose wrapper
// wrote its pid to pidfile, through a second exec.
func (s *Sandbox) killGroup(ctx context.Context, pidfile string) error {
	_, err := s.rt.run1(ctx, s.name, []string{sandbox.Shell, "-c", sandbox.KillGroupScript, pidfile}, nil)
	return err
}

// execution is one exec started by Start: its output comes over the
// exec's stream, which client-go carries.
type execution struct {
	sb      *Sandbox
	ex      remotecommand.Executor
	opts    remotecommand.StreamOptions
	ctx     context.Context
	cut     context.CancelFunc
	pidfile string
}

var _ sandbox.Execution = (*execution)(nil)

// Stream streams the exec until the command's output ends and returns its
// exit code (client-go reports a non-zero one as an ExitError).
func (e *execution) Stream() (int, error) {
	err := e.ex.StreamWithContext(e.ctx, e.opts)
	e.cut() // frees the context; the stream is over
	var ee utilexec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitStatus(), nil
	}
	return -1, err
}

// Exit explains a stream that failed: a removed sandbox, a cut output, or
// the API server's error.
func (e *execution) Exit(_ context.Context, code int, err error, cut bool) (int, error) {
	if err == nil {
		return code, nil
	}
	s := e.sb
	switch {
	case s.isRemoved() || s.rt.pods.isGone(s.name):
		return -1, fmt.Errorf("exec in %s: %w", s.name, sandbox.ErrRemoved)
	case cut:
		return -1, fmt.Errorf("exec in %s: the output was cut 2s after the kill (a process that left the command's session holds it)", s.name)
	}
	return -1, s.execErr(err)
}

// Kill kills the exec's process group through a second exec.
func (e *execution) Kill() error {
	s := e.sb
	if s.isRemoved() {
		return sandbox.ErrRemoved
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.rt.opts.CallTimeout)
	defer cancel()
	if err := s.killGroup(ctx, e.pidfile); err != nil {
		return fmt.Errorf("kill in %s: %w", s.name, err)
	}
	return nil
}

// Cut ends the exec's connection, which ends the output streams.
func (e *execution) Cut() { e.cut() }
