// Package bridge connects a sandbox that has no network and no secrets to
// the host, per request, over Unix sockets:
//
//   - tools.sock: an MCP server (github.com/modelcontextprotocol/go-sdk) that
//     exposes the request's host tools (assistant JS functions, Go functions
//     registered by embedders). Inside the sandbox the agent CLI starts
//     `agentbox bridge mcp`, a stdio MCP server that relays to this socket.
//   - model.sock: an HTTP proxy for the model APIs the CLIs speak (the
//     Anthropic Messages API, the OpenAI Responses API, the Gemini API).
//     Inside the sandbox `agentbox bridge run` listens on loopback in the
//     sandbox's own network namespace and relays to this socket. The
//     sandbox holds only a per-request token; the host proxy checks it,
//     swaps it for the connector's real key, meters usage and enforces the
//     request deadline. It forwards only the routes the CLIs need, matched
//     after normalising the path (policy.go), with only the fields, tools,
//     content sources, headers and betas they send (allowlist.go), holds
//     every model request to the turn's model and token limit (Limits), and
//     bounds what a sandbox takes: connections, request bodies' size, time
//     and memory, a turn's calls (budget.go). A refusal is an error in the
//     API's own shape (refusal.go).
//   - egress.sock (with an egress policy): the sandbox's HTTP(S) proxy to
//     other hosts, within the policy, with secrets the sandbox holds only as
//     placeholders (egress.go, package bridge/egress).
//   - ports.sock (Options.Ports): the port relay, which carries the host's
//     connections to the sandbox's declared ports the other way round
//     (the sandbox dials out, the host uses its connections; ports.go).
//   - mcp.sock (Options.RemoteMCP): the remote MCP servers of the
//     assistant, reached by the host with their credentials; the CLI
//     starts `agentbox bridge mcp --server NAME` for each (remote.go).
//
// Where the sandbox shares no file system with the host (a Kubernetes pod
// on another node), the same three channels run over TCP with mutual TLS
// through the server's Gateway instead (gateway.go).
//
// The host side is a Session (Start ... Close), one per request. The
// in-sandbox side is the Guest* functions, run by the agentbox binary that
// the session mounts read-only into the sandbox.
package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/sandbox"
)

// Paths and addresses inside the sandbox.
const (
	// GuestToolsSocket is where the tools socket appears in the sandbox.
	GuestToolsSocket = "/run/agentbox/tools.sock"
	// GuestModelSocket is where the model socket appears in the sandbox.
	GuestModelSocket = "/run/agentbox/model.sock"
	// GuestBinary is where the agentbox binary appears (read-only).
	GuestBinary = "/opt/agentbox/agentbox"
	// GuestProxyAddr is the loopback address the in-sandbox model proxy
	// listens on. With network "none" the sandbox has its own loopback, so a
	// fixed port never collides; where it is taken (network "host"),
	// `agentbox bridge run` falls back to a free port and points the CLI's
	// ANTHROPIC_BASE_URL at it.
	GuestProxyAddr = "127.0.0.1:41880"
)

// ServerName is the name the host-tools MCP server is given in the CLI's MCP
// configuration; the agent sees tool NAME as mcp__agentbox__NAME.
const ServerName = "agentbox"

// Defaults.
const (
	// DefaultToolTimeout bounds one host tool call when neither the tool
	// nor Options set a timeout.
	DefaultToolTimeout = 30 * time.Second
	// DefaultUID and DefaultGID are the sandbox user the sockets are given to.
	DefaultUID = 1000
	DefaultGID = 1000
)

// Sentinel errors.
var (
	// ErrClosed is returned by methods of a closed Session.
	ErrClosed = errors.New("bridge session closed")
	// ErrPathTooLong means a socket path exceeds the kernel's limit; the
	// hint is to use a shorter Options.Dir.
	ErrPathTooLong = errors.New("socket path too long (Unix sockets allow 107 bytes): use a shorter bridge directory")
)

// Options configure one bridge session.
type Options struct {
	// Dir is the parent of the per-request directories holding the sockets
	// ("" = $TMPDIR/agentbox-bridge). It must be on the host the sandbox
	// runtime binds from and short enough for socket paths.
	Dir string
	// UID and GID own the sockets, so the sandbox user (and only it, besides
	// the host) can connect. Zero means DefaultUID/DefaultGID. When the host
	// process may not chown (it is not root), the sockets stay owned by the
	// host user with mode 0666 inside the host-only 0700 directory: a sandbox
	// still reaches only the sockets bind-mounted into it.
	UID, GID int
	// UserID and ChatID identify the request; tool handlers read them with
	// CallFrom.
	UserID, ChatID string
	// Tools are the host tools the agent may call; exactly these are listed.
	// Without tools no MCP socket is created and MCPServer returns the zero
	// value.
	Tools []Tool
	// ToolTimeout bounds each tool call whose Tool.Timeout is zero
	// (0 = DefaultToolTimeout).
	ToolTimeout time.Duration
	// Upstream is the connector the model proxy forwards to (real host and
	// key). A zero Upstream (no Type, no Host) disables the model proxy.
	Upstream executor.Connection
	// UpstreamAuth says how the key is presented upstream: AuthAPIKey
	// (x-api-key, the default) or AuthBearer (Authorization: Bearer).
	UpstreamAuth string
	// Breaker is the upstream connector's circuit breaker, shared with
	// every other call to that connector (nil: none). While it is open the
	// proxy refuses the CLI's calls with an answer it does not retry.
	Breaker *breaker.Breaker
	// Limits hold model requests to a model and token limit and bound a
	// turn's model calls (see SetLimits).
	Limits Limits
	// Connections bounds the sandbox's open connections to the model
	// proxy (0: DefaultConnections). Up to twice as many more are answered
	// with a 429; the rest are closed at once.
	Connections int
	// Server holds the bounds shared by every session of a server: the
	// request bodies held and the connections open at once (nil: only the
	// session's own bounds).
	Server *ServerLimits
	// OnRefuse is told about the model requests the proxy refused for a
	// reason an operator should hear of (a field not allowed, a turn's
	// calls spent, memory or connections bounded), once per reason and
	// field in a turn. It must not block.
	OnRefuse func(Refusal)
	// Transport carries upstream requests (nil: a shared keep-alive
	// transport).
	Transport http.RoundTripper
	// Deadline ends the request: tool calls and model requests after it are
	// refused, running ones are cut. Zero means no deadline beyond ctx.
	Deadline time.Time
	// Binary is the host path of a static agentbox binary to mount into the
	// sandbox ("" = the running executable).
	Binary string
	// ReadableBinary mounts a binary the sandbox user may read, not the
	// execute-only copy (see mountedBinary): gVisor's kernel reads the ELF
	// itself with the caller's rights, so it cannot run a binary its user
	// cannot read. The relays are then non-dumpable from Harden on, a few
	// milliseconds into their start, rather than from their first
	// instruction.
	ReadableBinary bool
	// Logger receives one line per model request and tool call (never keys
	// or tokens); nil discards.
	Logger *slog.Logger
	// Egress, when set, gives the sandbox an egress proxy: its only way to
	// other hosts, within a policy, with secrets it never holds (egress.go).
	Egress *EgressOptions
	// RemoteMCP gives the sandbox the remote MCP relay: the host reaches
	// the remote MCP servers set with SetRemoteMCP for it (remote.go).
	RemoteMCP bool
	// Ports are the sandbox ports the host may connect to through the
	// port relay (ports.go): the assistant's declared preview ports. None:
	// no relay.
	Ports []int
	// Gateway, when set, carries the sandbox's connections over the
	// network (mutual TLS and the session's token) instead of Unix
	// sockets: for sandboxes that share no file system with the server
	// (gateway.go). The sandbox then needs SandboxEnv and no socket mounts.
	Gateway *Gateway
}

// Upstream authentication styles.
const (
	AuthAPIKey = "x-api-key"
	AuthBearer = "bearer"
)

// Session is one request's bridge: a private host directory with the tools
// and model sockets and the servers behind them. Methods are safe for
// concurrent use. Close removes everything; it is idempotent.
type Session struct {
	opts   Options
	log    *slog.Logger
	dir    string
	binary string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// turn is the context of the turn at hand of a session kept between
	// turns (BeginTurn); nil: the session's own.
	turn atomic.Pointer[context.Context]

	tools  *toolServer   // nil without tools
	model  *modelServer  // nil without upstream
	egress *egressServer // nil without Options.Egress
	remote *remoteServer // nil without Options.RemoteMCP
	ports  *PortRelay    // nil without Options.Ports

	gwID  string       // the session's id on Options.Gateway
	creds *Credentials // what the sandbox needs to reach it

	closeOnce sync.Once
	closeErr  error
}

// Start creates a session: the per-request directory, the sockets and the
// servers on them. ctx bounds the session's life (with Options.Deadline);
// the caller must Close the session, also when ctx ends.
func Start(ctx context.Context, opts Options) (s *Session, err error) {
	if opts.UID == 0 {
		opts.UID = DefaultUID
	}
	if opts.GID == 0 {
		opts.GID = DefaultGID
	}
	if opts.ToolTimeout <= 0 {
		opts.ToolTimeout = DefaultToolTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	tools, err := compileTools(opts.Tools)
	if err != nil {
		return nil, err
	}
	var upstream *upstreamTarget
	if opts.Upstream.Type != "" || opts.Upstream.Host != "" {
		if upstream, err = newUpstream(opts.Upstream, opts.UpstreamAuth, opts.Breaker); err != nil {
			return nil, err
		}
	}
	binary, parent, err := binaryAndDir(opts)
	if err != nil {
		return nil, err
	}
	// The per-request directory has a random name and mode 0700, owned by
	// the sandbox user when we may chown (only that user and the host can
	// enter it). Sandboxes never see it: they get only the socket files
	// bind-mounted into them.
	dir, err := os.MkdirTemp(parent, randomName(6)+"-")
	if err != nil {
		return nil, fmt.Errorf("bridge dir: %w", err)
	}
	// Named before anything else goes in: a server starting after a crash
	// removes it only once this process is gone (CleanStale).
	if err := writeOwner(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bridge dir: %w", err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, opts.UID, opts.GID); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("bridge dir: %w", err)
		}
	}
	if opts.Gateway == nil && len(filepath.Join(dir, "model.sock")) > 107 {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("bridge dir %s: %w", parent, ErrPathTooLong)
	}

	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if !opts.Deadline.IsZero() {
		sctx, cancel = withDeadlineCancel(sctx, cancel, opts.Deadline)
	}
	s = &Session{opts: opts, log: log, dir: dir, binary: binary, ctx: sctx, cancel: cancel}
	defer func() {
		if err != nil {
			_ = s.Close(context.WithoutCancel(ctx))
			s = nil
		}
	}()
	// A request's ctx ending ends the session's servers too; the caller
	// still calls Close to remove the directory.
	stop := context.AfterFunc(ctx, cancel)
	s.wg.Go(func() {
		<-sctx.Done()
		stop()
	})

	if opts.Gateway != nil {
		if err := s.register(len(tools) > 0, upstream != nil); err != nil {
			return nil, err
		}
	}
	if len(tools) > 0 {
		ln, err := s.listen("tools.sock")
		if err != nil {
			return nil, err
		}
		s.tools = newToolServer(s, tools, ln)
		s.wg.Go(s.tools.serve)
	}
	if upstream != nil {
		ln, err := s.listen("model.sock")
		if err != nil {
			return nil, err
		}
		s.model = newModelServer(s, upstream, ln)
		s.model.limits.Store(&opts.Limits)
		s.wg.Go(s.model.serve)
	}
	if opts.Egress != nil {
		if err := s.startEgress(opts.Egress); err != nil {
			return nil, err
		}
	}
	if opts.RemoteMCP {
		ln, err := s.listen("mcp.sock")
		if err != nil {
			return nil, err
		}
		s.remote = newRemoteServer(s, ln)
		s.wg.Go(s.remote.serve)
	}
	if len(opts.Ports) > 0 {
		ln, err := s.listen(channelPorts)
		if err != nil {
			return nil, err
		}
		s.ports = newPortRelay(sctx, ln, opts.Ports)
		s.wg.Go(s.ports.serve)
	}
	return s, nil
}

// withDeadlineCancel adds a deadline to ctx, keeping one cancel for both.
func withDeadlineCancel(ctx context.Context, cancel context.CancelFunc, d time.Time) (context.Context, context.CancelFunc) {
	dctx, dcancel := context.WithDeadline(ctx, d)
	return dctx, func() { dcancel(); cancel() }
}

// listen creates the named socket in the session directory and gives it to
// the sandbox user.
func (s *Session) listen(name string) (net.Listener, error) {
	if s.gwID != "" {
		return s.opts.Gateway.listener(s.gwID, name), nil
	}
	path := filepath.Join(s.dir, name)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("bridge listen %s: %w", name, err)
	}
	mode := os.FileMode(0o600)
	if err := os.Chown(path, s.opts.UID, s.opts.GID); err != nil {
		if !errors.Is(err, os.ErrPermission) {
			ln.Close()
			return nil, fmt.Errorf("bridge socket %s: %w", name, err)
		}
		// Not root: only the bind mount and the 0700 parent protect it.
		if os.Getuid() != s.opts.UID {
			mode = 0o666
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("bridge socket %s: %w", name, err)
	}
	return ln, nil
}

// binaryAndDir are the binary a session of opts mounts into its sandbox
// and the parent of its directory, made.
func binaryAndDir(opts Options) (binary, parent string, err error) {
	binary = opts.Binary
	if binary == "" {
		if binary, err = os.Executable(); err != nil {
			return "", "", fmt.Errorf("bridge binary: %w", err)
		}
	}
	if st, err := os.Stat(binary); err != nil {
		return "", "", fmt.Errorf("bridge binary: %w", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return "", "", fmt.Errorf("bridge binary %s: not an executable file", binary)
	}
	parent = opts.Dir
	if opts.Gateway != nil && opts.Gateway.dir != "" {
		parent = opts.Gateway.dir
	}
	if parent == "" {
		parent = DefaultDir()
	}
	// The parent may be traversed but not listed (0711): a runtime that
	// binds as the sandbox user (local, bubblewrap) must reach the
	// per-request directory below it, whose random name it is given.
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return "", "", fmt.Errorf("bridge dir: %w", err)
	}
	if err := os.Chmod(parent, 0o711); err != nil {
		return "", "", fmt.Errorf("bridge dir: %w", err)
	}
	// Beside the per-request folders, not among them: a copy is shared by
	// every session and outlives them.
	if binary, err = mountedBinary(binary, filepath.Join(filepath.Dir(parent), "agentbox-bin"), opts.ReadableBinary); err != nil {
		return "", "", err
	}
	return binary, parent, nil
}

// BinaryMount is the mount of the agentbox binary that every session of
// opts (its Binary, Dir, Gateway and ReadableBinary) gives its sandbox,
// the first of Session.Mounts: what a sandbox made ahead of its session
// is made with (sandbox.Pooler).
func BinaryMount(opts Options) (sandbox.Mount, error) {
	binary, _, err := binaryAndDir(opts)
	if err != nil {
		return sandbox.Mount{}, err
	}
	return sandbox.Mount{Source: binary, Target: GuestBinary}, nil
}

// Dir is the session's private host directory (removed by Close).
func (s *Session) Dir() string { return s.dir }

// Mounts are the bind mounts the sandbox needs: the agentbox binary
// (read-only) and the session's sockets (writable, as connecting to a socket
// needs write permission).
func (s *Session) Mounts() []sandbox.Mount {
	m := []sandbox.Mount{{Source: s.binary, Target: GuestBinary}}
	if s.gwID != "" {
		return m // the rest comes over the network
	}
	if s.tools != nil {
		m = append(m, sandbox.Mount{Source: filepath.Join(s.dir, "tools.sock"), Target: GuestToolsSocket, Writable: true})
	}
	if s.model != nil {
		m = append(m, sandbox.Mount{Source: filepath.Join(s.dir, "model.sock"), Target: GuestModelSocket, Writable: true})
	}
	if s.remote != nil {
		m = append(m, sandbox.Mount{Source: filepath.Join(s.dir, "mcp.sock"), Target: GuestRemoteMCPSocket, Writable: true})
	}
	if s.ports != nil {
		m = append(m, sandbox.Mount{Source: filepath.Join(s.dir, channelPorts), Target: GuestPortsSocket, Writable: true})
	}
	return append(m, s.egressMounts()...)
}

// MCPServer is the stdio MCP server definition to add to the CLI's MCP
// configuration under ServerName. It is the zero value when the session
// has no tools.
func (s *Session) MCPServer() assistant.MCPServer {
	if s.tools == nil {
		return assistant.MCPServer{}
	}
	return assistant.MCPServer{
		ID:        ServerName,
		Transport: "stdio",
		Command:   GuestBinary,
		Args:      []string{"bridge", "mcp", "--socket", s.guestSocket(channelTools, GuestToolsSocket)},
	}
}

// Env is the environment the CLI needs for the model proxy: the loopback
// base URL and the per-request token as its API key. It is empty without a
// model proxy. The token is worthless outside this session.
func (s *Session) Env() map[string]string {
	if s.model == nil {
		return map[string]string{}
	}
	return map[string]string{
		"ANTHROPIC_BASE_URL": "http://" + GuestProxyAddr,
		"ANTHROPIC_API_KEY":  *s.model.token.Load(),
		// With no network there is nothing to send telemetry to; waiting on
		// it would only slow the CLI down.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
}

// Connection is the connector the CLI inside the sandbox must be given in
// place of the real one: the loopback proxy as host and the per-request
// token as key, with the real connector's model. An executor that puts the
// connector into the CLI's environment then leaks nothing. Without a model
// proxy it is the zero value.
func (s *Session) Connection() executor.Connection {
	if s.model == nil {
		return executor.Connection{}
	}
	// The proxy speaks whatever its upstream speaks: an openai connector's
	// Responses API (Codex, opencode), an anthropic one's Messages API.
	typ := "anthropic"
	if s.opts.Upstream.Type == "openai" {
		typ = "openai"
	}
	return executor.Connection{
		Type:  typ,
		Host:  "http://" + GuestProxyAddr,
		Key:   *s.model.token.Load(),
		Model: s.opts.Upstream.Model,
	}
}

// SetUpstream points the model proxy at another connector, with that
// connector's breaker (nil: none), for the rest of the session (a Create
// hook may switch connectors after the sandbox exists). Requests already in
// flight keep their upstream. It fails when the session has no model proxy.
func (s *Session) SetUpstream(c executor.Connection, auth string, b *breaker.Breaker) error {
	if s.model == nil {
		return errors.New("bridge: this session has no model proxy")
	}
	up, err := newUpstream(c, auth, b)
	if err != nil {
		return err
	}
	s.model.up.Store(up)
	s.opts.Upstream.Model, s.opts.Upstream.Type = c.Model, c.Type
	return nil
}

// SetLimits holds the model requests that follow to l: the model every
// messages request uses and the most max_tokens it may ask for (the turn
// decides them after the session started, once a Create hook ran).
// Requests already in flight keep theirs. It fails when the session has no
// model proxy.
func (s *Session) SetLimits(l Limits) error {
	if s.model == nil {
		return errors.New("bridge: this session has no model proxy")
	}
	s.model.limits.Store(&l)
	return nil
}

// Token is the per-request token the sandbox presents to the model proxy
// ("" without a model proxy).
func (s *Session) Token() string {
	if s.model == nil {
		return ""
	}
	return *s.model.token.Load()
}

// UseToken makes token (NewToken's) the one the sandbox presents to the
// model proxy, in place of the session's own: for a CLI started before
// the session, with token in its environment (a warm pool's primed CLI).
// It is called before the sandbox is given the session's connection; the
// session's own token is refused from then on.
func (s *Session) UseToken(token string) error {
	switch {
	case s.model == nil:
		return errors.New("bridge: this session has no model proxy")
	case !strings.HasPrefix(token, "agentbox-bridge-") || len(token) < len("agentbox-bridge-")+24:
		return errors.New("bridge: not a model token")
	}
	s.model.token.Store(&token)
	return nil
}

// WrapCommand returns argv prefixed with `agentbox bridge run`, which starts
// the in-sandbox model and egress proxies, waits until they listen, and
// then runs argv with stdio passed through, signals forwarded and its exit
// status. Without either proxy argv is returned unchanged, unless the
// session runs across the network (then the wrapper also saves the
// credentials for the CLI's MCP relay).
func (s *Session) WrapCommand(argv []string) []string {
	if s.model == nil && s.egress == nil && s.gwID == "" {
		return argv
	}
	out := []string{GuestBinary, "bridge", "run"}
	if s.model != nil {
		out = append(out, "--socket", s.guestSocket(channelModel, GuestModelSocket), "--listen", GuestProxyAddr)
	} else {
		out = append(out, "--socket", "")
	}
	out = append(out, s.egressArgs()...)
	return append(append(out, "--"), argv...)
}

// Usage is the model usage metered so far: the tokens of every response
// the proxy passed through (also of responses cut short), and the calls it
// forwarded (ModelCalls). It is measured on the host, so the sandbox
// cannot under-report it.
func (s *Session) Usage() chat.Usage {
	if s.model == nil {
		return chat.Usage{}
	}
	return s.model.meter.total()
}

// CircuitOpen is the error of the first model request the proxy refused
// because the connector's circuit breaker was open (nil when none was):
// the turn's real cause when the CLI then fails.
func (s *Session) CircuitOpen() *chat.Error {
	if s.model == nil {
		return nil
	}
	return s.model.refused.Load()
}

// Close stops the servers, ends running tool calls and model requests,
// revokes the token and removes the directory with the sockets. It waits
// for the session's goroutines until ctx ends. It is idempotent.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.model != nil {
			s.model.revoke()
		}
		if s.gwID != "" {
			s.opts.Gateway.unregister(s.gwID)
		}
		s.cancel()
		if s.tools != nil {
			errs = append(errs, s.tools.close())
		}
		if s.model != nil {
			errs = append(errs, s.model.close())
		}
		if s.remote != nil {
			errs = append(errs, s.remote.close())
		}
		if s.ports != nil {
			errs = append(errs, s.ports.close())
		}
		errs = append(errs, s.closeEgress(ctx))
		done := make(chan struct{})
		go func() {
			s.wg.Wait()
			if s.tools != nil {
				s.tools.handlers.Wait()
			}
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("bridge close: %w", ctx.Err()))
		}
		if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("bridge remove dir: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// randomName returns n random bytes as hex.
func randomName(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
