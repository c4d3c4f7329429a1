package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/bridge/egress"
)

// The session's remote MCP servers, reached by the host: a fourth socket,
// mcp.sock. The credentials of a remote (http, sse) MCP server are its
// headers, and a header value in the CLI's configuration or environment
// would be in every tool the agent runs. So the CLI starts `agentbox
// bridge mcp --server NAME` instead, a stdio relay to this socket; the
// host connects to the server with its headers and relays JSON-RPC both
// ways, the tool list cut to the tools the assistant allows (the agent
// could otherwise call the others by talking to the socket itself) and
// the server's messages scrubbed of the headers' values. As Yao reaches
// its MCP servers from its own process, the sandbox needs no network for
// them.

// GuestRemoteMCPSocket is where the remote MCP socket appears.
const GuestRemoteMCPSocket = "/run/agentbox/mcp.sock"

// channelRemoteMCP is the remote MCP relay's channel on a gateway.
const channelRemoteMCP = "mcp.sock"

// maxRemoteConns bounds the relay connections of one session: each holds a
// connection to a remote server.
const maxRemoteConns = 16

// remoteDialTimeout bounds a connection to a remote server (the TLS
// handshake and the response headers too); its streams may then last.
const remoteDialTimeout = 30 * time.Second

// remoteTransport carries the relays' requests, of every session.
var remoteTransport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSHandshakeTimeout = remoteDialTimeout
	t.ResponseHeaderTimeout = remoteDialTimeout
	return t
}()

// RemoteMCP is a remote MCP server the session's host relay reaches for
// the sandbox.
type RemoteMCP struct {
	// Transport is "http" (streamable HTTP) or "sse".
	Transport string
	// URL is the server's address.
	URL string
	// Header goes with every request to the server: its credentials, which
	// stay on the host.
	Header http.Header
	// Tools are the tools the agent may list and call (empty: all).
	Tools []string
}

// String never shows the headers' values.
func (r RemoteMCP) String() string {
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range r.Header {
			if !yield(k) {
				return
			}
		}
	})
	return fmt.Sprintf("%s %s headers=[%s] tools=%v", r.Transport, r.URL, strings.Join(names, " "), r.Tools)
}

// remoteServer serves mcp.sock.
type remoteServer struct {
	s       *Session
	ln      net.Listener
	servers atomic.Pointer[map[string]*remoteConfig]

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// remoteConfig is a RemoteMCP ready to connect to.
type remoteConfig struct {
	RemoteMCP
	scrub *egress.Scrubber // the headers' values
}

func newRemoteServer(s *Session, ln net.Listener) *remoteServer {
	r := &remoteServer{s: s, ln: ln, conns: map[net.Conn]struct{}{}}
	r.servers.Store(&map[string]*remoteConfig{})
	return r
}

// SetRemoteMCP sets the remote MCP servers the sandbox may reach through
// the host, by name, for the connections that follow (a kept sandbox's
// later turns may set others). It fails when servers are given to a
// session without a remote MCP relay (Options.RemoteMCP), or a server has
// no URL or an unknown transport.
func (s *Session) SetRemoteMCP(servers map[string]RemoteMCP) error {
	if s.remote == nil {
		if len(servers) == 0 {
			return nil
		}
		return errors.New("bridge: this session has no remote MCP relay")
	}
	m := make(map[string]*remoteConfig, len(servers))
	for name, r := range servers {
		if r.URL == "" || (r.Transport != "http" && r.Transport != "sse") {
			return fmt.Errorf("bridge: remote mcp server %q: want an http or sse server with a url", name)
		}
		// The headers' values, and what the URL may carry (a key in its
		// query, a password).
		var values []string
		if u, err := url.Parse(r.URL); err == nil {
			if pw, ok := u.User.Password(); ok {
				values = append(values, pw)
			}
			for _, vs := range u.Query() {
				values = append(values, vs...)
			}
		}
		for _, vs := range r.Header {
			for _, v := range vs {
				values = append(values, v)
				if _, cred, ok := strings.Cut(v, " "); ok {
					values = append(values, strings.TrimSpace(cred)) // "Bearer TOKEN"
				}
			}
		}
		m[name] = &remoteConfig{RemoteMCP: r, scrub: egress.NewScrubber(values...)}
	}
	s.remote.servers.Store(&m)
	return nil
}

// RemoteMCPServer is the stdio MCP server the CLI's configuration names in
// place of the remote server name: the relay to the host (zero without a
// remote MCP relay).
func (s *Session) RemoteMCPServer(name string) assistant.MCPServer {
	if s.remote == nil {
		return assistant.MCPServer{}
	}
	return assistant.MCPServer{
		ID:        name,
		Transport: "stdio",
		Command:   GuestBinary,
		Args:      []string{"bridge", "mcp", "--socket", s.guestSocket(channelRemoteMCP, GuestRemoteMCPSocket), "--server", name},
	}
}

// serve accepts relay connections until the listener closes.
func (r *remoteServer) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed || len(r.conns) >= maxRemoteConns {
			r.mu.Unlock()
			r.s.log.Warn("bridge remote mcp: connection refused", "reason", "closed or too many connections")
			c.Close()
			continue
		}
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.s.wg.Go(func() { r.serveConn(c) })
	}
}

// serveConn reads the server's name, connects to it and relays.
func (r *remoteServer) serveConn(c net.Conn) {
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		c.Close()
	}()
	_ = c.SetReadDeadline(time.Now().Add(remoteDialTimeout))
	br := bufio.NewReaderSize(c, 64<<10)
	line, err := readLine(br, 256)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		r.s.log.Warn("bridge remote mcp: no server named", "err", err)
		return
	}
	name := string(line)
	cfg := (*r.servers.Load())[name]
	if cfg == nil {
		r.s.log.Warn("bridge remote mcp: unknown server", "server", name)
		return
	}
	ctx := r.s.ctx
	client := &http.Client{Transport: headerTransport{h: cfg.Header, rt: remoteTransport}}
	var t mcp.Transport = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client}
	if cfg.Transport == "sse" {
		t = &mcp.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: client}
	}
	// Connect's context carries an SSE server's stream: the transport's
	// timeouts bound the connection, not a deadline here.
	server, err := t.Connect(ctx)
	if err != nil {
		r.s.log.Warn("bridge remote mcp: connect", "server", name, "err", cfg.scrub.String(err.Error()))
		return
	}
	stop := context.AfterFunc(ctx, func() { server.Close(); c.Close() })
	defer stop()
	out := &lineWriter{w: scrubbedWriter{w: c, s: cfg.scrub}}
	if err := relayMCP(ctx, server, br, out, cfg.Tools); err != nil && ctx.Err() == nil {
		r.s.log.Warn("bridge remote mcp: relay", "server", name, "err", cfg.scrub.String(err.Error()))
	}
}

// close stops accepting and closes every connection.
func (r *remoteServer) close() error {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	if err := r.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge remote mcp close: %w", err)
	}
	return nil
}

// scrubbedWriter scrubs each write, a whole message line (lineWriter), of
// the values of s.
type scrubbedWriter struct {
	w io.Writer
	s *egress.Scrubber
}

func (sw scrubbedWriter) Write(p []byte) (int, error) {
	if !sw.s.Empty() {
		p = append([]byte(nil), p...)
		sw.s.Scan(p, true)
	}
	return sw.w.Write(p)
}
