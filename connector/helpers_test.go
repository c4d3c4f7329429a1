package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testKey is the API key given to clients in tests; it must never show up
// in an error or event.
const testKey = "sk-test-SECRET0123456789"

// reply is one scripted answer of a fake provider.
type reply struct {
	status int
	header map[string]string
	body   string        // whole body (error JSON, or raw SSE)
	events []string      // SSE data payloads; "name|{json}" sends "event: name"
	stall  time.Duration // wait before the first event (after headers)
	pause  time.Duration // wait between events
	cut    bool          // drop the connection after the events, without an end
}

// fake is an httptest server answering each request with the next reply
// (the last one repeats) and recording the requests.
type fake struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []recorded
}

type recorded struct {
	path   string
	header http.Header
	body   map[string]any
}

func newFake(t *testing.T, replies ...reply) *fake {
	t.Helper()
	f := &fake{replies: replies}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body})
	n := len(f.reqs)
	rep := f.replies[min(n, len(f.replies))-1]
	f.mu.Unlock()

	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status != 0 && rep.status != http.StatusOK {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(rep.status)
		io.WriteString(w, rep.body)
		return
	}
	if rep.events == nil {
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		io.WriteString(w, rep.body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	wait := func(d time.Duration) bool {
		if d == 0 {
			return true
		}
		select {
		case <-time.After(d):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	if !wait(rep.stall) {
		return
	}
	for i, e := range rep.events {
		if i > 0 && !wait(rep.pause) {
			return
		}
		if name, data, ok := strings.Cut(e, "|"); ok && !strings.HasPrefix(e, "{") {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		} else {
			fmt.Fprintf(w, "data: %s\n\n", e)
		}
		_ = rc.Flush()
	}
	if rep.cut {
		panic(http.ErrAbortHandler)
	}
}

func (f *fake) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// newTestClient builds a client against f with fast retries and a private
// transport (closed at cleanup), recording the backoff waits instead of
// sleeping them.
func newTestClient(t *testing.T, typ string, f *fake, mod func(*Config)) (*client, *[]time.Duration) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := Config{
		Type: typ, Host: f.URL, Key: testKey, Model: "test-model",
		HTTPClient: &http.Client{Transport: tr},
		Retry:      RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond},
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl := c.(*client)
	var mu sync.Mutex
	waits := &[]time.Duration{}
	cl.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		*waits = append(*waits, d)
		mu.Unlock()
		return ctx.Err()
	}
	return cl, waits
}

// compact renders the events as "start text", "delta text Hel", ..., with
// ids checked for consistency and replaced by their order of appearance.
func compact(t *testing.T, evs []chat.Event) []string {
	t.Helper()
	chattest.Check(t, evs)
	seen := map[string]int{}
	open := map[string]bool{}
	var out []string
	for _, ev := range evs {
		if _, ok := seen[ev.ID]; !ok {
			if ev.Event != chat.Start {
				t.Errorf("event %+v before its start", ev)
			}
			seen[ev.ID] = len(seen) + 1
		}
		switch ev.Event {
		case chat.Start:
			open[ev.ID] = true
		case chat.End:
			if !open[ev.ID] {
				t.Errorf("end of a message that is not open: %+v", ev)
			}
			delete(open, ev.ID)
		}
		s := fmt.Sprintf("%s %d %s", ev.Event, seen[ev.ID], ev.Type)
		if ev.Text != "" {
			s += " " + ev.Text
		}
		if ev.Type == chat.TypeToolCall && ev.Event == chat.Start {
			s += fmt.Sprintf(" %v %v %s", ev.Props["name"], ev.Props["id"], ev.Props["input"])
		}
		if ev.Type == chat.TypeNotice && ev.Event == chat.Start {
			s = fmt.Sprintf("start %d notice %v", seen[ev.ID], ev.Props["code"])
		}
		out = append(out, s)
	}
	if len(open) > 0 {
		t.Errorf("messages never ended: %v", open)
	}
	return out
}

func userMsg(s string) []chat.Message { return []chat.Message{{Role: chat.RoleUser, Content: s}} }

// openAIChunks builds OpenAI stream chunks.
func oaText(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"c1","model":"gpt-test","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}`
}

func oaReason(s string) string {
	b, _ := json.Marshal(s)
	return `{"id":"c1","model":"gpt-test","choices":[{"index":0,"delta":{"reasoning_content":` + string(b) + `},"finish_reason":null}]}`
}

func oaFinish(reason string) string {
	return `{"id":"c1","model":"gpt-test","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

const oaUsage = `{"id":"c1","model":"gpt-test","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":10}}}`

// Anthropic events.
func anStart() string {
	return `message_start|{"type":"message_start","message":{"id":"msg_1","model":"claude-test","usage":{"input_tokens":25,"output_tokens":1,"cache_read_input_tokens":5,"cache_creation_input_tokens":2}}}`
}

func anBlock(i int, kind string) string {
	cb := `{"type":"text","text":""}`
	switch kind {
	case "thinking":
		cb = `{"type":"thinking","thinking":""}`
	case "tool_use":
		cb = `{"type":"tool_use","id":"toolu_1","name":"lookup","input":{}}`
	}
	return fmt.Sprintf(`content_block_start|{"type":"content_block_start","index":%d,"content_block":%s}`, i, cb)
}

func anDelta(i int, kind, s string) string {
	b, _ := json.Marshal(s)
	field := map[string]string{"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json", "signature_delta": "signature"}[kind]
	return fmt.Sprintf(`content_block_delta|{"type":"content_block_delta","index":%d,"delta":{"type":"%s","%s":%s}}`, i, kind, field, b)
}

func anStop(i int) string {
	return fmt.Sprintf(`content_block_stop|{"type":"content_block_stop","index":%d}`, i)
}

func anEnd(reason string) []string {
	return []string{
		`message_delta|{"type":"message_delta","delta":{"stop_reason":"` + reason + `"},"usage":{"output_tokens":12}}`,
		`message_stop|{"type":"message_stop"}`,
	}
}

func concat(parts ...any) []string {
	var out []string
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			out = append(out, v)
		case []string:
			out = append(out, v...)
		}
	}
	return out
}
