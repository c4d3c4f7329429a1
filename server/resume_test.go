package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// sseFrame is one server-sent event as a client reads it.
type sseFrame struct {
	id    string
	event chat.Event
}

// sseReader reads the frames of an event stream one at a time.
type sseReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openStream(t *testing.T, ts *httptest.Server, method, path, token, body string, hdr ...string) (*sseReader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: status %d", method, path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &sseReader{resp: resp, sc: sc}, cancel
}

// next returns the next frame, or false at the end of the stream.
func (r *sseReader) next(t *testing.T) (sseFrame, bool) {
	t.Helper()
	var f sseFrame
	seen := false
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "" && seen:
			return f, true
		case strings.HasPrefix(line, "id: "):
			f.id, seen = line[4:], true
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &f.event); err != nil {
				t.Fatalf("frame data %q: %v", line, err)
			}
			seen = true
		}
	}
	return f, false
}

// rest reads the frames up to the end of the stream.
func (r *sseReader) rest(t *testing.T) []sseFrame {
	t.Helper()
	var out []sseFrame
	for {
		f, ok := r.next(t)
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

// gatedTurn emits the first part of an answer, waits for gate, then ends
// it; ctxErr receives the turn context's error after the gate.
func gatedTurn(gate <-chan struct{}, ctxErr chan<- error) func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
	return func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "first "})
		select {
		case <-gate:
		case <-ctx.Done():
		}
		ctxErr <- ctx.Err()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "second"})
		emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
		return &pipeline.Response{Content: "first second"}, nil
	}
}

// TestDetachedTurnResumes: a detached turn runs on when its client goes,
// and a later request follows it from the last event id the client saw,
// or replays it from its start.
func TestDetachedTurnResumes(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	gate, ctxErr := make(chan struct{}), make(chan error, 1)
	fb.chat = gatedTurn(gate, ctxErr)
	ts := startServer(t, fb, nil)

	st, cancel := openStream(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"c1","message":"hi","detach":true}`)
	turn := st.resp.Header.Get("X-Turn-ID")
	first, ok := st.next(t)
	if !ok || first.id != turn+".1" || first.event.Text != "first " {
		t.Fatalf("first frame %+v (turn %q)", first, turn)
	}
	cancel() // the client goes away
	st.resp.Body.Close()
	time.Sleep(100 * time.Millisecond)
	close(gate)
	if err := <-ctxErr; err != nil {
		t.Fatalf("the detached turn was canceled with its client: %v", err)
	}

	// Bob cannot follow Alice's turn.
	if resp, _ := do(t, ts, "GET", "/api/chats/c1/events", tokenBob, "", "Last-Event-ID", first.id); resp.StatusCode != 404 {
		t.Errorf("another user's turn: %d", resp.StatusCode)
	}
	resumed, _ := openStream(t, ts, "GET", "/api/chats/c1/events", tokenAlice, "", "Last-Event-ID", first.id)
	rest := resumed.rest(t)
	if len(rest) != 3 || rest[0].id != turn+".2" || rest[0].event.Text != "second" || rest[2].event.Event != chat.Done {
		t.Fatalf("resumed frames: %+v", rest)
	}
	// Without an id the whole turn is replayed; the query parameter works
	// like the header.
	all, _ := openStream(t, ts, "GET", "/api/chats/c1/events", tokenAlice, "")
	if frames := all.rest(t); len(frames) != 4 || frames[0].id != turn+".1" {
		t.Errorf("replay: %+v", frames)
	}
	q, _ := openStream(t, ts, "GET", "/api/chats/c1/events?last_event_id="+turn+".3", tokenAlice, "")
	if frames := q.rest(t); len(frames) != 1 || frames[0].event.Event != chat.Done {
		t.Errorf("after .3: %+v", frames)
	}
}

// TestAttachedTurnEndsWithItsClient: without detach a turn ends when its
// client goes away, as before.
func TestAttachedTurnEndsWithItsClient(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	gate, ctxErr := make(chan struct{}), make(chan error, 1)
	fb.chat = gatedTurn(gate, ctxErr)
	ts := startServer(t, fb, nil)
	st, cancel := openStream(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"c1","message":"hi"}`)
	if _, ok := st.next(t); !ok {
		t.Fatal("no first frame")
	}
	cancel()
	select {
	case err := <-ctxErr:
		if err == nil {
			t.Error("the turn kept running without its client")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the turn did not end")
	}
}

func TestEventsErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, newFake(t), nil)
	for _, tc := range []struct {
		path, last string
		status     int
		want       string
	}{
		{"/api/chats/c1/events", "", 404, "no running turn"},
		{"/api/chats/c1/events", "r-0123456789abcdef01234567.3", 404, "to resume"},
		{"/api/chats/c1/events", "garbage", 400, "not an event id"},
		{"/api/chats/c1/events", "r-1.x", 400, "not an event id"},
		{"/api/chats/c1/events?last_event_id=r-1.2", "r-1.3", 400, "differ"},
		{"/api/chats/a%20b/events", "", 400, "chat id"},
	} {
		hdr := []string{}
		if tc.last != "" {
			hdr = append(hdr, "Last-Event-ID", tc.last)
		}
		resp, body := do(t, ts, "GET", tc.path, tokenAlice, "", hdr...)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s (%q) = %d %s; want %d and %q", tc.path, tc.last, resp.StatusCode, body, tc.status, tc.want)
		}
	}
}

// TestResumeBuffer: a turn's events beyond the buffer are dropped from its
// front; a replay then starts with a notice that says so.
func TestResumeBuffer(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	fb.chat = func(ctx context.Context, req *pipeline.Request, emit chat.EmitFunc) (*pipeline.Response, error) {
		emit(chat.Event{Event: chat.Start, ID: "m1", Type: chat.TypeText})
		for i := 0; i < 50; i++ {
			emit(chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: strings.Repeat("x", 40)})
		}
		emit(chat.Event{Event: chat.End, ID: "m1", Type: chat.TypeText})
		return &pipeline.Response{}, nil
	}
	ts := startServer(t, fb, func(c *Config) { c.ResumeBuffer = 1000 })
	if resp, _ := do(t, ts, "POST", "/api/assistants/qa/chat", tokenAlice, `{"chat_id":"c1","message":"hi","detach":true}`); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	st, _ := openStream(t, ts, "GET", "/api/chats/c1/events", tokenAlice, "")
	frames := st.rest(t)
	if len(frames) < 3 || frames[0].event.Type != chat.TypeNotice || frames[0].event.Props["code"] != "events_dropped" ||
		frames[len(frames)-1].event.Event != chat.Done {
		t.Fatalf("replay of a long turn: %+v", frames)
	}
	if len(frames) > 12 {
		t.Errorf("%d frames kept, the buffer holds about 1000 bytes", len(frames))
	}
}

// TestShutdownEndsDetachedTurns: a detached turn without a client gets the
// drain time like any request, then is canceled, and Serve returns.
func TestShutdownEndsDetachedTurns(t *testing.T) {
	t.Parallel()
	fb := newFake(t)
	gate, ctxErr := make(chan struct{}), make(chan error, 1)
	fb.chat = gatedTurn(gate, ctxErr)
	s, err := New(Config{Backend: fb, Tokens: testTokens, Logger: quietLogger(), DrainTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()

	rctx, rcancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(rctx, "POST", "http://"+ln.Addr().String()+"/api/assistants/qa/chat",
		strings.NewReader(`{"chat_id":"c1","message":"hi","detach":true}`))
	req.Header.Set("Authorization", "Bearer "+tokenAlice)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := (&sseReader{resp: resp, sc: bufio.NewScanner(resp.Body)}).next(t); !ok {
		t.Fatal("no first frame")
	}
	rcancel()
	resp.Body.Close()

	start := time.Now()
	cancel()
	select {
	case err := <-ctxErr:
		if err == nil {
			t.Error("the turn was not canceled")
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("canceled after %s, before the drain time", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the detached turn still runs after the shutdown")
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}
