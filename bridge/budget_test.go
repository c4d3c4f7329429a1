package bridge

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// heapInUse is the heap the process holds after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// slowBodies opens n connections to s's model socket, each announcing a
// body of size+1 bytes and sending size of them, then stalling; it
// returns when every write completed or was stopped at deadline (the
// proxy not reading it: the attack's end, not a timed assertion), and how
// many completed. The connections are closed at cleanup.
func slowBodies(t *testing.T, s *Session, n, size int, deadline time.Time) int {
	t.Helper()
	body := make([]byte, size)
	for i := range body {
		body[i] = ' '
	}
	var done atomic.Int32
	var wg sync.WaitGroup
	for range n {
		c, err := net.Dial("unix", filepath.Join(s.Dir(), "model.sock"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Go(func() {
			_ = c.SetWriteDeadline(deadline)
			fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: bridge\r\nX-Api-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", s.Token(), size+1)
			if _, err := c.Write(body); err == nil {
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return int(done.Load())
}

// TestSlowBodiesHoldBoundedMemory: 40 connections of one sandbox that each
// send most of a large body and then stall (the attack that took a server
// from 74 MB to 2.1 GB) hold at most the session's request memory, not 40
// bodies; two sandboxes sharing a server bound hold at most that; the
// proxy still answers, and gives the memory back when they go.
func TestSlowBodiesHoldBoundedMemory(t *testing.T) {
	const size = 8 << 20 // 40 of them: 320 MiB read whole
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	server := NewServerLimits(64<<20, 0)
	s1 := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, Server: server})
	s2 := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, Server: server})
	before := heapInUse()
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	var sent1, sent2 int
	wg.Go(func() { sent1 = slowBodies(t, s1, 40, size, deadline) })
	wg.Go(func() { sent2 = slowBodies(t, s2, 40, size, deadline) })
	wg.Wait()
	held := heapInUse() - before
	t.Logf("bodies sent whole: %d + %d of 80; heap held: %d MiB", sent1, sent2, held>>20)
	// The server's bound (64 MiB: seven bodies) and this test's own 8 MiB
	// buffer, with room for the connections' goroutines and buffers.
	if held > 96<<20 {
		t.Errorf("80 stalled bodies hold %d MiB of heap, want at most the server's 64 MiB request memory", held>>20)
	}
	if sent1+sent2 > 7 {
		t.Errorf("%d bodies of %d MiB were read with 64 MiB of request memory", sent1+sent2, size>>20)
	}
	// Another sandbox still gets its answer: a request over the server's
	// bound waits its turn, then is told to retry.
	s3 := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, Server: server})
	s3.model.memory.timeout = 100 * time.Millisecond
	resp := post(t, unixClient(s3), "http://bridge", "/v1/messages", s3.Token(), `{"model":"m"}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || gjson.GetBytes(b, "error.type").String() != errRateLimit {
		t.Errorf("a request while the memory is held: %d %s", resp.StatusCode, b)
	}
}

// TestSlowBodyTimesOut: a body that stops arriving is answered with a
// 408 in the API's shape when its time is up, and its memory is free
// again.
func TestSlowBodyTimesOut(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport})
	s.model.memory.timeout = 200 * time.Millisecond
	c, err := net.Dial("unix", filepath.Join(s.Dir(), "model.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1beta/models/g:generateContent HTTP/1.1\r\nHost: bridge\r\nX-Goog-Api-Key: %s\r\nContent-Length: 1000\r\n\r\n{\"contents\":", s.Token())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || gjson.GetBytes(b, "error.status").String() != "DEADLINE_EXCEEDED" {
		t.Fatalf("a stalled body: %d %s", resp.StatusCode, b)
	}
	if !s.model.memory.session.TryAcquire(sessionRequestMemory) {
		t.Fatal("the stalled body's memory is still held")
	}
	s.model.memory.session.Release(sessionRequestMemory)
}

// TestBodySizes: a body over its API's limit is refused, announced (before
// it is read) or chunked (once the limit is passed), and a chunked body
// within it passes.
func TestBodySizes(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport})
	// send writes the request on a connection of its own (the proxy may
	// answer before it read it all) and reads the answer.
	send := func(header string, body io.Reader) (int, string) {
		c, err := net.Dial("unix", filepath.Join(s.Dir(), "model.sock"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		go func() {
			fmt.Fprintf(c, "POST /v1beta/models/g:generateContent HTTP/1.1\r\nHost: bridge\r\nX-Goog-Api-Key: %s\r\n%s\r\n", s.Token(), header)
			_, _ = io.Copy(c, body)
		}()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, b := send(fmt.Sprintf("Content-Length: %d\r\n", maxGeminiBody+1), strings.NewReader("")); st != http.StatusRequestEntityTooLarge || !strings.Contains(b, "20971520") {
		t.Errorf("announced: %d %s", st, b)
	}
	chunked := func(body string) io.Reader {
		var b strings.Builder
		for len(body) > 0 {
			n := min(len(body), 64<<10)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
			body = body[n:]
		}
		b.WriteString("0\r\n\r\n")
		return strings.NewReader(b.String())
	}
	if st, b := send("Transfer-Encoding: chunked\r\n", chunked(strings.Repeat(" ", maxGeminiBody)+"{}")); st != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: %d %s", st, b)
	}
	if st, b := send("Transfer-Encoding: chunked\r\n", chunked(`{"contents":[]}`+strings.Repeat(" ", 300<<10))); st != 200 || up.count() != 1 {
		t.Errorf("chunked within the limit: %d %s", st, b)
	}
}

// gatedUpstream holds every request until released, counting those in
// flight at once.
type gatedUpstream struct {
	release  chan struct{}
	arrived  chan struct{}
	n        atomic.Int32
	inflight atomic.Int32
	peak     atomic.Int32
}

func (u *gatedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.n.Add(1)
	now := u.inflight.Add(1)
	for {
		p := u.peak.Load()
		if now <= p || u.peak.CompareAndSwap(p, now) {
			break
		}
	}
	u.arrived <- struct{}{}
	<-u.release
	u.inflight.Add(-1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"usage":{"input_tokens":1,"output_tokens":1}}`)
}

// TestTurnCalls: of 60 parallel model calls of one turn, at most
// Parallel reach the provider at once, the rest wait; past Calls the
// turn's calls are refused with a 429 in the API's shape that the CLI does
// not retry; a new turn counts afresh.
func TestTurnCalls(t *testing.T) {
	up := &gatedUpstream{release: make(chan struct{}), arrived: make(chan struct{}, 100)}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	var refusals atomic.Int32
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport,
		Connections: 100, OnRefuse: func(r Refusal) {
			if r.Reason == RefusedCalls {
				refusals.Add(1)
			}
		}})
	if err := s.SetLimits(Limits{Calls: 50, Parallel: 8}); err != nil {
		t.Fatal(err)
	}
	c := unixClient(s)
	var wg sync.WaitGroup
	var ok, limited atomic.Int32
	for range 60 {
		wg.Go(func() {
			resp := post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"m"}`)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200:
				ok.Add(1)
			case resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("X-Should-Retry") == "false" &&
				gjson.GetBytes(b, "error.type").String() == errRateLimit && strings.Contains(string(b), "calls_per_turn"):
				limited.Add(1)
			default:
				t.Errorf("call: %d %s", resp.StatusCode, b)
			}
		})
	}
	// Eight arrive; the ten past the turn's 50 are refused meanwhile.
	for range 8 {
		<-up.arrived
	}
	close(up.release)
	wg.Wait()
	if ok.Load() != 50 || limited.Load() != 10 || up.n.Load() != 50 {
		t.Errorf("answered %d, refused %d, upstream got %d: want 50, 10, 50", ok.Load(), limited.Load(), up.n.Load())
	}
	if p := up.peak.Load(); p > 8 {
		t.Errorf("%d calls in flight at once, want at most 8", p)
	}
	if refusals.Load() != 1 {
		t.Errorf("told %d times, want once", refusals.Load())
	}
	if u := s.Usage(); u.ModelCalls != 50 || u.InputTokens != 50 {
		t.Errorf("usage %+v: want the 50 calls forwarded and metered", u)
	}
	// A kept chat's next turn has its own budget.
	end := s.BeginTurn(context.Background(), time.Time{})
	defer end()
	resp := post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"m"}`)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the next turn's first call: %d", resp.StatusCode)
	}
}

// TestConnectionBound: a sandbox's connections past its bound are answered
// with a 429 in the API's shape (up to twice the bound) or closed at once;
// those within keep working.
func TestConnectionBound(t *testing.T) {
	up := &recorder{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: testUpstream(srv.URL), Transport: srv.Client().Transport, Connections: 4})
	sock := filepath.Join(s.Dir(), "model.sock")
	readers := map[net.Conn]*bufio.Reader{}
	// request sends a request on c and reads the answer whole.
	request := func(c net.Conn) (*http.Response, error) {
		fmt.Fprintf(c, "POST /v1/responses HTTP/1.1\r\nHost: bridge\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", s.Token())
		if readers[c] == nil {
			readers[c] = bufio.NewReader(c)
		}
		resp, err := http.ReadResponse(readers[c], nil)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		return resp, err
	}
	dial := func() net.Conn {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// Four connections, each answered and kept open: the bound.
	var conns []net.Conn
	for i := range 4 {
		c := dial()
		conns = append(conns, c)
		if resp, err := request(c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", i, resp, err)
		}
	}
	// The fifth is answered with a 429, and closed.
	resp, err := request(dial())
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a connection past the bound: %v %v", resp, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if gjson.GetBytes(b, "error.code").String() != RefusedConnections || !resp.Close {
		t.Errorf("a connection past the bound: %s", b)
	}
	// Four more, idle, reach twice the bound (the kernel hands
	// connections over in order); the next is closed unanswered.
	for range 4 {
		dial()
	}
	if resp, err := request(dial()); err == nil {
		t.Fatalf("a connection past twice the bound: answered %d", resp.StatusCode)
	}
	// The first four still work.
	resp, err = request(conns[0])
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a connection within the bound: %v %v", resp, err)
	}
}
