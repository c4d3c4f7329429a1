package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The port relay carries connections from the host into the sandbox's own
// network namespace, to the ports its assistant declared (previews of what
// the agent serves). The sandbox has no network and publishes no port, and
// only the sandbox may connect to a bridge socket, so the relay runs the
// other way round: `agentbox bridge ports` in the sandbox keeps a few idle
// connections open to the host's ports socket (or the gateway's ports
// channel on Kubernetes); the host hands one to each preview connection,
// names the port on it, and the guest connects to that port on loopback
// and splices. The guest also watches /proc/net/tcp{,6} and tells the host
// which declared ports listen, on a connection of its own.
//
// The protocol, one line each way before the bytes flow:
//
//	guest → host  "idle\n"                 a pooled connection, waiting
//	host  → guest "dial PORT\n"            use it for PORT
//	guest → host  "ok\n" | "err MSG\n"     connected, or why not
//	guest → host  "listen P1,P2,...\n"     on the watch connection, at every change
//
// Everything the guest says is untrusted: the host reads bounded lines and
// dials only the ports it was given.

// GuestPortsSocket is where the ports socket appears in the sandbox.
const GuestPortsSocket = "/run/agentbox/ports.sock"

// channelPorts is the port relay's channel on a gateway.
const channelPorts = "ports.sock"

const (
	// guestPortsIdle is how many idle connections the guest keeps: the
	// preview connections that can open at the same instant without
	// waiting for the guest to dial another (a browser opens six).
	guestPortsIdle = 8
	// portsPoll is how often the guest reads /proc/net/tcp.
	portsPoll = 500 * time.Millisecond
	// portsLineMax bounds a protocol line.
	portsLineMax = 1024
	// portsWait bounds how long Dial waits for an idle connection and for
	// the guest's answer.
	portsWait = 10 * time.Second
)

// Sentinel errors of the port relay.
var (
	// ErrNoRelay means no idle relay connection came from the sandbox in
	// time: `agentbox bridge ports` is not running there (it ended, or
	// was killed).
	ErrNoRelay = errors.New("the sandbox's port relay is not running")
	// ErrPortRefused means nothing listens on the port in the sandbox.
	ErrPortRefused = errors.New("nothing listens on this port in the sandbox")
)

// PortRelay is the host side of a session's port relay. Methods are safe
// for concurrent use.
type PortRelay struct {
	ctx   context.Context
	ln    net.Listener
	ports []int
	idle  chan net.Conn

	mu        sync.Mutex
	listening []int
	notify    []func([]int)
	conns     map[net.Conn]struct{}
}

func newPortRelay(ctx context.Context, ln net.Listener, ports []int) *PortRelay {
	return &PortRelay{ctx: ctx, ln: ln, ports: slices.Clone(ports), idle: make(chan net.Conn, 2*guestPortsIdle), conns: map[net.Conn]struct{}{}}
}

// Ports are the ports the relay may dial, as the session was given them.
func (r *PortRelay) Ports() []int { return slices.Clone(r.ports) }

// Listening are the relay's ports that listen in the sandbox, as the
// guest last reported them (sorted).
func (r *PortRelay) Listening() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.listening)
}

// OnListening calls fn with the listening ports at every change the guest
// reports, from then on until the session closes. fn must not block.
func (r *PortRelay) OnListening(fn func(listening []int)) {
	r.mu.Lock()
	r.notify = append(r.notify, fn)
	r.mu.Unlock()
}

// Dial connects to port on the sandbox's loopback through the guest. It
// fails with ErrPortRefused when nothing listens there, ErrNoRelay when
// the guest is not running, and refuses a port the session was not given.
func (r *PortRelay) Dial(ctx context.Context, port int) (net.Conn, error) {
	if !slices.Contains(r.ports, port) {
		return nil, fmt.Errorf("port %d is not declared", port)
	}
	wait := time.NewTimer(portsWait)
	defer wait.Stop()
	for {
		var c net.Conn
		select {
		case c = <-r.idle:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-r.ctx.Done():
			return nil, ErrClosed
		case <-wait.C:
			return nil, ErrNoRelay
		}
		ok, err := r.use(ctx, c, port)
		if err != nil {
			// A stale idle connection (the guest went away): try the next.
			c.Close()
			continue
		}
		if !ok.ok {
			c.Close()
			if strings.Contains(ok.msg, "refused") {
				return nil, fmt.Errorf("port %d: %w", port, ErrPortRefused)
			}
			return nil, fmt.Errorf("port %d: %s", port, ok.msg)
		}
		return r.track(c), nil
	}
}

type dialAnswer struct {
	ok  bool
	msg string
}

// use asks the guest on c to connect to port and reads its answer.
func (r *PortRelay) use(ctx context.Context, c net.Conn, port int) (dialAnswer, error) {
	deadline := time.Now().Add(portsWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "dial %d\n", port); err != nil {
		return dialAnswer{}, err
	}
	// Byte by byte: what follows the answer is the app's, not ours to
	// buffer.
	line, err := readRawLine(c)
	if err != nil {
		return dialAnswer{}, err
	}
	if line == "ok" {
		return dialAnswer{ok: true}, nil
	}
	msg, _ := strings.CutPrefix(line, "err ")
	return dialAnswer{msg: msg}, nil
}

// readRawLine reads one line of at most portsLineMax bytes without reading
// past it.
func readRawLine(r io.Reader) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) < portsLineMax {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errLineTooLong
}

// track keeps c among the connections Close ends.
func (r *PortRelay) track(c net.Conn) net.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		c.Close()
		return c
	}
	r.conns[c] = struct{}{}
	return &trackedConn{Conn: c, r: r}
}

type trackedConn struct {
	net.Conn
	r    *PortRelay
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.r.mu.Lock()
		delete(c.r.conns, c.Conn)
		c.r.mu.Unlock()
	})
	return c.Conn.Close()
}

// CloseWrite half-closes, when the underlying connection can.
func (c *trackedConn) CloseWrite() error {
	if hc, ok := c.Conn.(halfCloser); ok {
		return hc.CloseWrite()
	}
	return c.Conn.Close()
}

// serve accepts the guest's connections until the session ends.
func (r *PortRelay) serve() {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() { r.accept(c) })
	}
}

// accept reads a guest connection's first line: an idle connection joins
// the pool, a watch connection reports the listening ports.
func (r *PortRelay) accept(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(portsWait))
	line, err := readRawLine(c)
	_ = c.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		c.Close()
	case line == "idle":
		select {
		case r.idle <- c:
		default:
			c.Close() // more than the guest should keep
		}
	case strings.HasPrefix(line, "listen"):
		r.setListening(line)
		r.watch(c)
	default:
		c.Close()
	}
}

// watch reads listen lines until the connection or the session ends.
func (r *PortRelay) watch(c net.Conn) {
	stop := context.AfterFunc(r.ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	br := bufio.NewReaderSize(c, portsLineMax)
	for {
		line, err := readLine(br, portsLineMax)
		if err != nil {
			return
		}
		r.setListening(string(line))
	}
}

// setListening takes a "listen P1,P2" line: only declared ports count.
func (r *PortRelay) setListening(line string) {
	rest, ok := strings.CutPrefix(line, "listen")
	if !ok {
		return
	}
	var ports []int
	for f := range strings.SplitSeq(strings.TrimSpace(rest), ",") {
		if p, err := strconv.Atoi(f); err == nil && slices.Contains(r.ports, p) && !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	slices.Sort(ports)
	r.mu.Lock()
	if slices.Equal(ports, r.listening) {
		r.mu.Unlock()
		return
	}
	r.listening = ports
	notify := slices.Clone(r.notify)
	r.mu.Unlock()
	for _, fn := range notify {
		fn(slices.Clone(ports))
	}
}

// close ends the listener, the idle connections and the relayed ones.
func (r *PortRelay) close() error {
	err := r.ln.Close()
	for {
		select {
		case c := <-r.idle:
			c.Close()
			continue
		default:
		}
		break
	}
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Ports is the session's port relay (nil unless Options.Ports named some).
func (s *Session) Ports() *PortRelay { return s.ports }

// PortsCommand is the command that runs the relay's guest in the sandbox,
// for the whole of the sandbox's life (nil without a relay).
func (s *Session) PortsCommand() []string {
	if s.ports == nil {
		return nil
	}
	ps := make([]string, len(s.ports.ports))
	for i, p := range s.ports.ports {
		ps[i] = strconv.Itoa(p)
	}
	return []string{GuestBinary, "bridge", "ports", "--socket", s.guestSocket(channelPorts, GuestPortsSocket), "--ports", strings.Join(ps, ",")}
}

// GuestPorts is `agentbox bridge ports`: it keeps guestPortsIdle idle
// connections open to the host's ports socket and relays each the host
// uses to the port it names on loopback (only one of ports), and reports
// which of ports listen. It returns when ctx ends or the host's socket is
// gone (the session closed).
func GuestPorts(ctx context.Context, socket string, ports []int) error {
	if len(ports) == 0 {
		return errors.New("no ports to relay")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, guestPortsIdle+1)
	for range guestPortsIdle {
		wg.Go(func() {
			errs <- guestPortsSlot(ctx, &wg, socket, ports)
			cancel()
		})
	}
	wg.Go(func() {
		errs <- guestPortsWatch(ctx, socket, ports)
		cancel()
	})
	wg.Wait()
	close(errs)
	var first error
	for err := range errs {
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// guestPortsSlot keeps one idle connection open: when the host uses it,
// it starts the relay and opens the next.
func guestPortsSlot(ctx context.Context, wg *sync.WaitGroup, socket string, ports []int) error {
	for ctx.Err() == nil {
		host, err := dialHost(ctx, socket)
		if err != nil {
			return err
		}
		stop := context.AfterFunc(ctx, func() { host.Close() })
		if _, err := io.WriteString(host, "idle\n"); err != nil {
			stop()
			host.Close()
			return fmt.Errorf("ports relay: %w", err)
		}
		line, err := readRawLine(host)
		stop()
		if err != nil {
			host.Close()
			if ctx.Err() != nil {
				return nil
			}
			continue // the host dropped an idle connection: open another
		}
		port, err := strconv.Atoi(strings.TrimPrefix(line, "dial "))
		if err != nil || !strings.HasPrefix(line, "dial ") || !slices.Contains(ports, port) {
			_, _ = io.WriteString(host, "err not a declared port\n")
			host.Close()
			continue
		}
		local, err := dialLoopback(ctx, port)
		if err != nil {
			_, _ = fmt.Fprintf(host, "err %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			host.Close()
			continue
		}
		if _, err := io.WriteString(host, "ok\n"); err != nil {
			host.Close()
			local.Close()
			continue
		}
		wg.Go(func() {
			defer host.Close()
			defer local.Close()
			relay(host, local)
		})
	}
	return nil
}

// dialLoopback connects to port on the IPv4 loopback, else the IPv6 one
// (a server may listen on either alone).
func dialLoopback(ctx context.Context, port int) (*net.TCPConn, error) {
	var d net.Dialer
	d.Timeout = dialTimeout
	c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		var err6 error
		if c, err6 = d.DialContext(ctx, "tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err6 != nil {
			return nil, err
		}
	}
	return c.(*net.TCPConn), nil
}

// guestPortsWatch reports which of ports listen, at once and at every
// change, reading /proc/net/tcp and tcp6 every portsPoll.
func guestPortsWatch(ctx context.Context, socket string, ports []int) error {
	host, err := dialHost(ctx, socket)
	if err != nil {
		return err
	}
	defer host.Close()
	stop := context.AfterFunc(ctx, func() { host.Close() })
	defer stop()
	// The host never writes here: a read that ends means it closed.
	gone := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, host)
		close(gone)
	}()
	tick := time.NewTicker(portsPoll)
	defer tick.Stop()
	last := "-"
	for {
		cur := listenLine(listeningPorts(), ports)
		if cur != last {
			if _, err := io.WriteString(host, cur+"\n"); err != nil {
				return nil
			}
			last = cur
		}
		select {
		case <-ctx.Done():
			return nil
		case <-gone:
			return nil
		case <-tick.C:
		}
	}
}

// listenLine is the listen line for the listening ports among ports.
func listenLine(listening map[int]bool, ports []int) string {
	var out []string
	for _, p := range ports {
		if listening[p] {
			out = append(out, strconv.Itoa(p))
		}
	}
	return "listen " + strings.Join(out, ",")
}
