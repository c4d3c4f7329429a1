package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
)

// What one sandbox may take of the server through its model proxy, and
// all sandboxes together. Without bounds a sandbox could hold the server's
// memory with slow request bodies (each read whole before it is checked)
// or send every call it likes to the provider at the operator's cost.
// The bounds: connections per sandbox (and per server), the time a request
// body may take to arrive, the memory request bodies hold per sandbox and
// per server, and the model calls of a turn, in flight and in all. The
// defaults are above what the CLIs do: Claude Code runs at most 10 tools
// at once (CLAUDE_CODE_MAX_TOOL_USE_CONCURRENCY), so with a subagent per
// tool some 12 model calls are in flight (7 measured with 6 subagents),
// and its workflows at most 16 agents; 16 agents calling every 2 s for the
// default 10-minute turn make 4800 calls.

// Defaults of the bounds.
const (
	// DefaultCalls bounds the model calls of one turn.
	DefaultCalls = 5000
	// DefaultParallel bounds the model calls of one turn in flight at
	// once; more wait for one to end.
	DefaultParallel = 32
	// DefaultConnections bounds a sandbox's open connections to its model
	// proxy.
	DefaultConnections = 64
	// DefaultServerConnections bounds the model proxies' connections of
	// all sandboxes sharing a ServerLimits.
	DefaultServerConnections = 1024
	// DefaultRequestMemory bounds the request bodies the model proxies of
	// all sandboxes sharing a ServerLimits hold at once.
	DefaultRequestMemory = 256 << 20
	// sessionRequestMemory bounds one sandbox's: two requests of the
	// largest size at once.
	sessionRequestMemory = 2 * maxMessagesBody
	// BodyTimeout is how long a request body may take to arrive once the
	// proxy starts reading it (32 MB at 0.5 MB/s; a CLI's arrives in
	// milliseconds over the socket).
	BodyTimeout = 60 * time.Second
	// idleTimeout closes a kept-alive connection left idle this long.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers (the CLIs send 1 to 3 KB).
	maxHeaderBytes = 64 << 10
)

// ServerLimits bound the model proxies of every session that shares them
// (Options.Server): the request bodies they hold at once and their
// connections. Safe for concurrent use.
type ServerLimits struct {
	memory    *semaphore.Weighted
	memoryMax int64
	conns     atomic.Int64
	connsMax  int64
}

// NewServerLimits returns bounds of requestMemory bytes of request bodies
// held at once (0: DefaultRequestMemory; at least the largest body an API
// takes) and connections open at once (0: DefaultServerConnections).
func NewServerLimits(requestMemory int64, connections int) *ServerLimits {
	if requestMemory <= 0 {
		requestMemory = DefaultRequestMemory
	}
	requestMemory = max(requestMemory, maxMessagesBody)
	if connections <= 0 {
		connections = DefaultServerConnections
	}
	return &ServerLimits{memory: semaphore.NewWeighted(requestMemory), memoryMax: requestMemory, connsMax: int64(connections)}
}

// RequestMemory is the bound of request bodies held at once.
func (l *ServerLimits) RequestMemory() int64 { return l.memoryMax }

// memoryBudget is what a session's request bodies may hold (its own bound
// and the server's) and how long one may take to arrive.
type memoryBudget struct {
	session *semaphore.Weighted
	server  *ServerLimits // nil: none
	timeout time.Duration
}

func newMemoryBudget(server *ServerLimits) *memoryBudget {
	n := int64(sessionRequestMemory)
	if server != nil {
		n = min(n, server.memoryMax)
	}
	return &memoryBudget{session: semaphore.NewWeighted(n), server: server, timeout: BodyTimeout}
}

// acquire waits for n bytes of both bounds until ctx ends.
func (b *memoryBudget) acquire(ctx context.Context, n int64) error {
	if err := b.session.Acquire(ctx, n); err != nil {
		return err
	}
	if b.server != nil {
		if err := b.server.memory.Acquire(ctx, n); err != nil {
			b.session.Release(n)
			return err
		}
	}
	return nil
}

// tryAcquire takes n bytes of both bounds if both have them now.
func (b *memoryBudget) tryAcquire(n int64) bool {
	if !b.session.TryAcquire(n) {
		return false
	}
	if b.server != nil && !b.server.memory.TryAcquire(n) {
		b.session.Release(n)
		return false
	}
	return true
}

func (b *memoryBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.session.Release(n)
	if b.server != nil {
		b.server.memory.Release(n)
	}
}

// Errors of readBody, each answered with its own status.
var (
	errBodyTooLarge = errors.New("request body too large")
	errBodyMemory   = errors.New("request memory exhausted")
)

// readBody reads a request body of at most limit bytes within b.timeout,
// holding it against the memory budget: a body of announced length waits
// for its bytes first (and holds nothing meanwhile); one without grows in
// steps, each taken at once or refused. release gives the bytes back (also
// on error).
func (b *memoryBudget) readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), err error) {
	deadline := time.Now().Add(b.timeout)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(deadline) // a connection without deadlines: ctx still bounds the wait
	var held int64
	release = func() { b.release(held); held = 0 }
	body, held, err = b.read(ctx, r, limit, deadline)
	if err != nil {
		// What is left of the body is not read (net/http would wait for
		// it before answering): the connection closes after the answer.
		_ = rc.SetReadDeadline(time.Now())
		return nil, release, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, release, nil
}

func (b *memoryBudget) read(ctx context.Context, r *http.Request, limit int64, deadline time.Time) (body []byte, held int64, err error) {
	if r.ContentLength > limit {
		return nil, 0, errBodyTooLarge
	}
	if n := r.ContentLength; n >= 0 {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		err := b.acquire(wctx, n)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			return nil, 0, errBodyMemory
		}
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
		return body, n, err
	}
	// Chunked: grow by doubling, each step held before it is allocated.
	body = []byte{}
	for {
		if len(body) == cap(body) {
			next := min(max(2*int64(cap(body)), 64<<10), limit+1)
			if next <= int64(cap(body)) {
				return nil, held, errBodyTooLarge
			}
			if !b.tryAcquire(next - held) {
				return nil, held, errBodyMemory
			}
			grown := make([]byte, len(body), next)
			copy(grown, body)
			body, held = grown, next
		}
		n, err := r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		switch {
		case int64(len(body)) > limit:
			return nil, held, errBodyTooLarge
		case err == io.EOF:
			return body, held, nil
		case err != nil:
			return nil, held, err
		}
	}
}

// refusal is the answer to a body readBody could not read.
func (b *memoryBudget) refusal(err error, limit int64) *refusal {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return &refusal{status: http.StatusRequestEntityTooLarge, typ: errTooLarge, reason: RefusedTooLarge, close: true,
			msg: fmt.Sprintf("request body exceeds %d bytes, this API's limit", limit)}
	case errors.Is(err, errBodyMemory):
		return &refusal{status: http.StatusTooManyRequests, typ: errRateLimit, reason: RefusedMemory, retryAfter: 5, close: true,
			msg: "the model proxy holds as many request bodies as it may; retry shortly"}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &refusal{status: http.StatusRequestTimeout, typ: errTimeout, reason: RefusedSlow, close: true,
			msg: fmt.Sprintf("the request body did not arrive within %s", b.timeout)}
	}
	return &refusal{status: http.StatusBadRequest, typ: errInvalid, msg: "the request body could not be read", close: true}
}

// turnCalls are one turn's model calls: counted, and bounded in flight.
// A session makes one at Start and at every BeginTurn.
type turnCalls struct {
	n atomic.Int64

	mu       sync.Mutex
	inflight int
	freed    chan struct{} // closed when a call ends; nil: nobody waits
	told     map[string]bool
}

func newTurnCalls() *turnCalls { return &turnCalls{told: map[string]bool{}} }

// admit counts a call and reports whether it is within limit.
func (t *turnCalls) admit(limit int) bool { return t.n.Add(1) <= int64(limit) }

// enter waits until fewer than limit calls are in flight, then counts
// this one in; leave ends it.
func (t *turnCalls) enter(ctx context.Context, limit int) error {
	for {
		t.mu.Lock()
		if t.inflight < limit {
			t.inflight++
			t.mu.Unlock()
			return nil
		}
		if t.freed == nil {
			t.freed = make(chan struct{})
		}
		freed := t.freed
		t.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (t *turnCalls) leave() {
	t.mu.Lock()
	t.inflight--
	if t.freed != nil {
		close(t.freed)
		t.freed = nil
	}
	t.mu.Unlock()
}

// maxTold bounds the refusals told in a turn: an agent inventing fields
// does not flood the chat with notices (each is still logged).
const maxTold = 20

// first reports whether key is told for the first time this turn (and is
// among its first maxTold).
func (t *turnCalls) first(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.told[key] || len(t.told) >= maxTold {
		return false
	}
	t.told[key] = true
	return true
}

// connLimiter is a model server's listener, bounding its connections: up
// to max are served; up to twice that are answered with a 429 (their
// requests' over flag) and closed; the rest, and any past the server's
// bound, are closed at once.
type connLimiter struct {
	net.Listener
	n      atomic.Int64
	max    int64
	server *ServerLimits
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		n := l.n.Add(1)
		var g int64
		if l.server != nil {
			g = l.server.conns.Add(1)
		}
		lc := &limitedConn{Conn: c, l: l, over: n > l.max}
		if n > 2*l.max || l.server != nil && g > l.server.connsMax {
			lc.Close()
			continue
		}
		return lc, nil
	}
}

// limitedConn is a connection counted by its connLimiter until closed.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	over bool
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.n.Add(-1)
		if c.l.server != nil {
			c.l.server.conns.Add(-1)
		}
	})
	return c.Conn.Close()
}

// CloseWrite half-closes a connection that can (Unix sockets, the
// gateway's TLS connections).
func (c *limitedConn) CloseWrite() error {
	if hc, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return hc.CloseWrite()
	}
	return nil
}

// overKey marks the context of a connection past the limit.
type overKey struct{}

// connContext marks the requests of a connection past its limit.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if lc, ok := c.(*limitedConn); ok && lc.over {
		return context.WithValue(ctx, overKey{}, true)
	}
	return ctx
}
