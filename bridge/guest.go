package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/agentbox/agentbox/sandbox"
)

// This file is the in-sandbox side, run by `agentbox bridge ...` inside the
// sandbox. It holds no protocol logic: the MCP server and the model proxy
// live on the host, so the sandbox side cannot be talked into anything the
// host would not do, and it stays transparent to every MCP and HTTP feature
// (cancellation, progress, streaming).

// dialTimeout bounds how long the guest waits for a host socket.
const dialTimeout = 3 * time.Second

// dialHost connects to a host socket, retrying briefly while it is not there
// yet (a sandbox can start before the host listens when a runtime is slow to
// bind-mount).
func dialHost(ctx context.Context, socket string) (halfCloser, error) {
	if channel, ok := strings.CutPrefix(socket, GatewayPrefix); ok {
		return dialGateway(ctx, channel)
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", socket)
		if err == nil {
			return c.(*net.UnixConn), nil
		}
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("connect to host socket %s: %w", socket, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to host socket %s: %w (is the bridge socket mounted?)", socket, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// GuestMCP is `agentbox bridge mcp`: a stdio MCP server for the agent CLI
// that relays every message to the host's MCP server on socket, where the
// tools are listed and run: the host tools, or with server set the remote
// MCP server of that name, which the host reaches (remote.go). A line from
// the CLI that is not a JSON-RPC message is answered with a JSON-RPC error
// and goes no further. It returns when either side ends: stdin closed (the
// CLI is done) or the host closed the connection (the request ended).
func GuestMCP(ctx context.Context, socket, server string, stdin io.Reader, stdout io.Writer) error {
	if strings.ContainsAny(server, "\r\n") {
		return fmt.Errorf("bad server name %q", server)
	}
	conn, err := dialHost(ctx, socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	if server != "" {
		if _, err := io.WriteString(conn, server+"\n"); err != nil {
			return fmt.Errorf("relay to host: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	out := &lineWriter{w: stdout}
	host := &lineWriter{w: conn}
	go func() {
		// EOF on stdin half-closes, letting the host finish what is in
		// flight.
		_ = readMessages(stdin, out, func(raw []byte, _ jsonrpc.Message) error { return host.line(raw) })
		_ = conn.CloseWrite()
	}()
	br := bufio.NewReaderSize(conn, 64<<10)
	for {
		line, err := readLine(br, MaxMCPLine)
		switch {
		case errors.Is(err, errLineTooLong):
			continue // the host's answers are bounded; never forward a partial line
		case err != nil:
			if errors.Is(err, io.EOF) || ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("relay from host: %w", err)
		}
		if err := out.line(line); err != nil {
			return fmt.Errorf("relay to the CLI: %w", err)
		}
	}
}

// GuestProxy relays every connection accepted on ln to the host's model
// socket until ctx ends. HTTP is handled end to end by the host proxy, so
// streaming responses pass through without buffering.
func GuestProxy(ctx context.Context, ln net.Listener, socket string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("model proxy accept: %w", err)
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				c.Close()
			}()
			hc, ok := c.(halfCloser)
			if !ok {
				return
			}
			up, err := dialHost(ctx, socket)
			if err != nil {
				fmt.Fprintf(os.Stderr, "agentbox bridge: %v\n", err)
				return
			}
			defer up.Close()
			mu.Lock()
			conns[up] = struct{}{}
			mu.Unlock()
			defer func() { mu.Lock(); delete(conns, up); mu.Unlock() }()
			relay(hc, up)
		})
	}
}

// halfCloser is a connection whose write side closes alone.
type halfCloser interface {
	net.Conn
	CloseWrite() error
}

// relay copies both ways until both directions are done, half-closing each
// write side at its reader's EOF.
func relay(a, b halfCloser) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(b, a)
		_ = b.CloseWrite()
	})
	_, _ = io.Copy(a, b)
	_ = a.CloseWrite()
	wg.Wait()
}

// ListenLoopback listens on addr, which must be a loopback IP and port; when
// the port is taken (a sandbox sharing the host's network), it listens on a
// free port of the same IP instead.
func ListenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("listen address %q: must be a loopback IP (the proxy is for this sandbox only)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if !errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("model proxy listen: %w", err)
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return nil, fmt.Errorf("model proxy listen: %w", err)
		}
	}
	return ln, nil
}

// RunConfig configures GuestRun.
type RunConfig struct {
	// Socket is the host model socket ("" when the session has no model
	// proxy, only an egress proxy).
	Socket string
	// Listen is the loopback address to serve the model proxy on; when it
	// is taken, a free port on the same host is used instead.
	Listen string
	// Egress, when set, serves the egress proxy too (guest_egress.go).
	Egress *GuestEgress
	// Argv is the command to run (the agent CLI).
	Argv []string
	// Stdin, Stdout and Stderr are passed to the command.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the command's environment (nil: this process's); its
	// ANTHROPIC_BASE_URL is set to the proxy's actual address.
	Env []string
}

// GuestRun is `agentbox bridge run`: it starts the model proxy (and the
// egress proxy), waits until it listens, runs the command with stdio
// passed through and signals forwarded, and returns the command's exit
// status (128+N when killed by signal N). When ctx ends, the command gets
// SIGTERM, then SIGKILL after a grace period.
func GuestRun(ctx context.Context, cfg RunConfig) (int, error) {
	if len(cfg.Argv) == 0 {
		return 2, errors.New("no command to run: give it after --")
	}
	env := cfg.Env
	if env == nil {
		env = os.Environ()
	}
	if cfg.Socket == "" && cfg.Egress == nil && lookupEnv(env, EnvCredentials) == "" {
		return 2, errors.New("nothing to serve: give the model socket, the egress socket or both")
	}
	// Across the network: the credentials, for the processes that do not
	// inherit the environment (the CLI's MCP servers).
	egressCA, err := writeCredentials(env)
	if err != nil {
		return 1, err
	}
	if cfg.Egress != nil && cfg.Egress.CA == gatewayEgressCA {
		if egressCA == "" {
			return 1, fmt.Errorf("egress CA: $%s carries none", EnvCredentials)
		}
		eg := *cfg.Egress
		eg.CA = egressCA
		cfg.Egress = &eg
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if cfg.Socket != "" {
		addr, stop, err := startRelay(pctx, cfg.Socket, cfg.Listen, "model")
		if err != nil {
			return 1, err
		}
		defer stop()
		env = setEnv(env, "ANTHROPIC_BASE_URL", "http://"+addr)
	}
	if cfg.Egress != nil {
		addr, stop, err := startRelay(pctx, cfg.Egress.Socket, cfg.Egress.Listen, "egress")
		if err != nil {
			return 1, err
		}
		defer stop()
		var cleanup func()
		if env, cleanup, err = cfg.Egress.environ(env, addr, cfg.Stderr); err != nil {
			return 1, err
		}
		defer cleanup()
	}

	cmd := exec.Command(cfg.Argv[0], cfg.Argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr
	cmd.Env = env
	setPdeathsig(cmd)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	waited, err := startLocked(cmd)
	if err != nil {
		return 127, fmt.Errorf("start %s: %w", cfg.Argv[0], err)
	}
	var kill <-chan time.Time
	ctxDone := ctx.Done()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case <-ctxDone:
			ctxDone = nil
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(10 * time.Second)
		case <-kill:
			_ = cmd.Process.Kill()
		case err := <-waited:
			return exitStatus(cmd, err)
		}
	}
}

// startRelay serves a host socket on a loopback address (listen, or a free
// port of its IP when it is taken) until stop, which waits for it.
func startRelay(ctx context.Context, socket, listen, what string) (addr string, stop func(), err error) {
	if strings.HasPrefix(socket, GatewayPrefix) {
		// Reached over the network: nothing to check on disk.
	} else if st, err := os.Stat(socket); errors.Is(err, fs.ErrNotExist) && filepath.Dir(socket) == sandbox.PoolSocketDir {
		// A pooled sandbox's sockets come when a chat claims it: a CLI
		// started ahead of the chat calls out only after that. A call
		// before fails as a socket not mounted does (dialHost).
	} else if err != nil {
		return "", nil, fmt.Errorf("%s socket: %w (is the bridge socket mounted?)", what, err)
	} else if st.Mode()&os.ModeSocket == 0 {
		return "", nil, fmt.Errorf("%s socket %s: not a socket", what, socket)
	}
	ln, err := ListenLoopback(listen)
	if err != nil {
		return "", nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- GuestProxy(ctx, ln, socket) }()
	return ln.Addr().String(), func() { cancel(); <-done }, nil
}

// startLocked starts cmd and waits for it on a goroutine locked to the
// OS thread that started it, and sends Wait's error. The kernel sends
// Pdeathsig (setPdeathsig) when that thread ends, not when this process
// does, and the Go runtime ends a thread whose locked goroutine exits
// (ours or a library's): started from an unlocked goroutine, the CLI
// could be SIGKILLed in the middle of its turn whenever the thread it
// was started from happened to end (golang/go#27505).
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// exitStatus is the shell's view of how cmd ended.
func exitStatus(cmd *exec.Cmd, err error) (int, error) {
	if cmd.ProcessState == nil {
		return 1, fmt.Errorf("wait: %w", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return cmd.ProcessState.ExitCode(), nil
}

// setEnv returns env with key set to value (replacing any earlier entry).
func setEnv(env []string, key, value string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+value)
}
