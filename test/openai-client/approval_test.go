package openaiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// guarded adds an assistant whose approval policy asks before the agent's
// Bash touches a file or makes a folder (the script's "touch the marker"
// and "make the folder").
var guarded = map[string]string{"assistants/guarded/package.yao": `{"name": "Guarded", "connector": "llm.anthropic",
	"sandbox": {"command": "claude", "timeout": "3m", "max_memory": "1g", "arguments": {"max_turns": 5}},
	"approval": {"ask": ["Bash(touch:*)", "Bash(mkdir:*)"], "timeout": "5m"}}`}

// TestApprovalOpenAI: the official openai package streams a guarded
// agent's turn; the approval request comes as a chunk without choices
// carrying agentbox_event (Chat Completions, also through the stream
// helper) or as a response.agentbox.approval_requested event (Responses);
// the answer goes to the native API and the stream then finishes, with
// the approval_resolved after it.
func TestApprovalOpenAI(t *testing.T) {
	a := startWith(t, guarded)
	var got report
	runNode(t, "approval.mjs", a.env(), &got)
	const done = "Touching it.\n\nDone: the sandbox says hello."
	got.expect(t, map[string]any{
		"chat.chatID": "sdk-approval-1", "chat.content": done, "chat.finish": []string{"stop"},
		"chat.events":                                       []string{"approval_requested", "approval_resolved"},
		"chat.requested.object":                             "chat.completion.chunk",
		"chat.requested.model":                              "guarded",
		"chat.requested.choices":                            []any{},
		"chat.requested.agentbox_event.type":                "approval_requested",
		"chat.requested.agentbox_event.props.tool":          "Bash",
		"chat.requested.agentbox_event.props.rule":          "Bash(touch:*)",
		"chat.requested.agentbox_event.props.input.command": "touch /workspace/marker-4412 && echo touched-4412",
		"chat.answer.status":                                200,
		"chat.answer.body.decision":                         "allow",
		"chat.resolved.decision":                            "allow", "chat.resolved.by": "user",

		"helper.events":            []string{"approval_requested", "approval_resolved"},
		"helper.answer.status":     200,
		"helper.resolved.decision": "deny", "helper.resolved.reason": "The user denied this tool call: not-today-5821",
		"helper.finish": "stop",

		"responses.types":          []string{"response.agentbox.approval_requested", "response.agentbox.approval_resolved"},
		"responses.requested.tool": "Bash", "responses.requested.rule": "Bash(touch:*)",
		"responses.answer.status": 200,
		"responses.status":        "completed",
	})
	got.contains(t, "helper.content", "Done: the sandbox says hello.")
	got.contains(t, "responses.text", "Done: the sandbox says hello.")
	for _, id := range []string{"chat.requested.agentbox_event.props.approval_id", "responses.requested.approval_id"} {
		if s, _ := got.get(id).(string); !strings.HasPrefix(s, "apr_") {
			t.Errorf("%s = %v", id, got.get(id))
		}
	}
	// The allowed calls ran; the denied one did not, and the model read
	// the reason.
	a.toolResult(t, "Please touch the marker.", "Bash", "touched-4412")
	a.toolResult(t, "Please touch the marker, in a response.", "Bash", "touched-4412")
	a.toolResult(t, "Please touch the marker, with the helper.", "Bash", "not-today-5821")
	if t.Failed() {
		raw, _ := json.MarshalIndent(got, "", "  ")
		t.Logf("report:\n%s", raw)
	}
}

// TestApprovalReconnectAndRestart drives a real `agentbox serve` with the
// native API: a client that loses its stream while a call waits sees the
// call again (GET .../approvals, and the stream resumed with
// Last-Event-ID), answers it, and follows the turn to its end; "remember"
// is kept with the chat across a restart; a call still waiting when the
// server stops ends with its turn, and the new server lists none;
// deleting the chat forgets what was remembered.
func TestApprovalReconnectAndRestart(t *testing.T) {
	a := startWith(t, guarded, "--drain-timeout", "3s")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// A detached turn asks; its client goes away.
	st := a.open(t, ctx, "POST", "/api/assistants/guarded/chat", `{"chat_id":"r1","message":"Please touch the marker.","detach":true}`)
	asked, last := st.until(t, pipelineApprovalRequested)
	st.close()
	id, _ := asked.Props["approval_id"].(string)
	if asked.Props["tool"] != "Bash" || asked.Props["rule"] != "Bash(touch:*)" {
		t.Fatalf("approval_requested %v", asked.Props)
	}
	// It reconnects: the call is listed, the stream resumes after the last
	// event it saw, and its answer lets the turn finish.
	pending := a.approvals(t, "r1")
	if len(pending) != 1 || pending[0]["approval_id"] != id || pending[0]["tool"] != "Bash" {
		t.Fatalf("pending after the reconnect: %v", pending)
	}
	resumed := a.open(t, ctx, "GET", "/api/chats/r1/events", "", "Last-Event-ID", last)
	rest := make(chan []chat.Event, 1)
	go func() { rest <- resumed.rest() }()
	if status, body := a.answer(t, "r1", id, `{"decision":"allow","remember":true}`); status != 200 {
		t.Fatalf("answer: %d %s", status, body)
	}
	events := <-rest
	if err := resumed.err; err != nil {
		t.Fatalf("resumed stream: %v", err)
	}
	checkTurn(t, "the resumed turn", events, "touched-4412")
	if n := count(events, pipelineApprovalRequested); n != 0 {
		t.Errorf("the resumed stream repeated the request (%d)", n)
	}
	if r := resolved(events); len(r) != 1 || r[0]["decision"] != "allow" || r[0]["by"] != "user" {
		t.Errorf("approval_resolved %v", r)
	}
	if status, _ := a.answer(t, "r1", id, `{"decision":"deny"}`); status != 409 {
		t.Errorf("a second answer: %d, want 409", status)
	}

	// Remembered: the chat's next call of the rule runs unasked.
	events = a.turn(t, ctx, "r1", "Please touch the marker.", "")
	checkTurn(t, "the remembered turn", events, "touched-4412")

	// A call waits when the server stops: the turn ends within the drain.
	st = a.open(t, ctx, "POST", "/api/assistants/guarded/chat", `{"chat_id":"r1","message":"Please make the folder.","detach":true}`)
	st.until(t, pipelineApprovalRequested)
	tail := make(chan []chat.Event, 1)
	go func() { tail <- st.rest() }()
	a.restart(t)
	events = <-tail
	if r := resolved(events); len(r) != 1 || r[0]["decision"] != "deny" || r[0]["by"] != "canceled" {
		t.Errorf("the waiting call ended with %v", r)
	}
	if len(events) == 0 || events[len(events)-1].Final == nil || events[len(events)-1].Final.Error != "shutting_down" {
		t.Errorf("the waiting turn's stream ended with %+v (%v), want a done event with error shutting_down", events, st.err)
	}
	if pending := a.approvals(t, "r1"); len(pending) != 0 {
		t.Errorf("after the restart: pending %v", pending)
	}
	if status, body := a.send(t, "GET", "/api/chats/r1/events", ""); status != 404 {
		t.Errorf("events after the restart: %d %s", status, body)
	}

	// "Remember" outlived the restart.
	events = a.turn(t, ctx, "r1", "Please touch the marker.", "")
	checkTurn(t, "the remembered turn after the restart", events, "touched-4412")

	// Deleting the chat forgets it: the same call in a new chat of that
	// id asks again.
	if status, body := a.send(t, "DELETE", "/api/chats/r1", ""); status/100 != 2 {
		t.Fatalf("delete: %d %s", status, body)
	}
	events = a.turn(t, ctx, "r1", "Please touch the marker.", `{"decision":"deny","reason":"asked-again-6120"}`)
	if n := count(events, pipelineApprovalRequested); n != 1 {
		t.Errorf("after the chat was deleted the call was asked %d times, want 1", n)
	}
	a.toolResult(t, "Please touch the marker.", "Bash", "asked-again-6120")
}

// pipelineApprovalRequested is the event type of an approval request.
const pipelineApprovalRequested = "approval_requested"

// stream is a native SSE stream being read.
type stream struct {
	rd     *sse.Reader
	body   io.Closer
	cancel context.CancelFunc
	err    error
}

// open sends a request whose answer is a native event stream, with the
// test user's token and header pairs hdr.
func (a *agentbox) open(t *testing.T, ctx context.Context, method, path, body string, hdr ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(ctx, method, a.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	s := &stream{rd: sse.NewReader(resp.Body, 16<<20), body: resp.Body, cancel: cancel}
	t.Cleanup(s.close)
	return s
}

// next returns the next event and its id; false at the end (s.err says
// why, nil for the stream's own end).
func (s *stream) next() (chat.Event, string, bool) {
	f, err := s.rd.Next()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			s.err = err
		}
		return chat.Event{}, "", false
	}
	var e chat.Event
	if err := json.Unmarshal(f.Data, &e); err != nil {
		s.err = fmt.Errorf("event %q: %w", f.Data, err)
		return chat.Event{}, "", false
	}
	return e, f.ID, true
}

// until reads up to the start of a message of type typ and returns it
// with its event id.
func (s *stream) until(t *testing.T, typ string) (chat.Event, string) {
	t.Helper()
	var seen []string
	for {
		e, id, ok := s.next()
		if !ok {
			t.Fatalf("the stream ended (%v) before a %s; it had %v", s.err, typ, seen)
		}
		seen = append(seen, e.Event+" "+e.Type)
		if e.Type == typ && e.Event == chat.Start {
			return e, id
		}
	}
}

// rest reads the stream to its end.
func (s *stream) rest() []chat.Event {
	var out []chat.Event
	for {
		e, _, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, e)
	}
}

func (s *stream) close() {
	s.cancel()
	s.body.Close()
}

// send sends a request with the test user's token and returns the status
// and body of the answer.
func (a *agentbox) send(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	ct := ""
	if body != "" {
		ct = "application/json"
	}
	return a.srv.Send(t, method, path, token, ct, strings.NewReader(body))
}

// approvals lists the chat's pending calls.
func (a *agentbox) approvals(t *testing.T, chatID string) []map[string]any {
	t.Helper()
	status, body := a.send(t, "GET", "/api/chats/"+chatID+"/approvals", "")
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); status != 200 || err != nil {
		t.Fatalf("approvals: %d %s", status, body)
	}
	return list.Data
}

// answer answers the chat's call id with body.
func (a *agentbox) answer(t *testing.T, chatID, id, body string) (int, string) {
	t.Helper()
	return a.send(t, "POST", "/api/chats/"+chatID+"/approvals/"+id, body)
}

// turn runs one native turn in chatID, answering what it asks with
// decision (none expected when ""), and returns its events.
func (a *agentbox) turn(t *testing.T, ctx context.Context, chatID, msg, decision string) []chat.Event {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"chat_id": chatID, "message": msg})
	s := a.open(t, ctx, "POST", "/api/assistants/guarded/chat", string(body))
	var out []chat.Event
	for {
		e, _, ok := s.next()
		if !ok {
			break
		}
		out = append(out, e)
		if e.Type == pipelineApprovalRequested && e.Event == chat.Start {
			if decision == "" {
				t.Errorf("%s: asked %v", msg, e.Props)
				decision = `{"decision":"deny"}`
			}
			if status, b := a.answer(t, chatID, e.Props["approval_id"].(string), decision); status != 200 {
				t.Errorf("answer: %d %s", status, b)
			}
		}
	}
	if s.err != nil {
		t.Fatalf("%s: stream: %v", msg, s.err)
	}
	return out
}

// checkTurn checks that the turn ended well, with a Bash result holding
// output.
func checkTurn(t *testing.T, what string, events []chat.Event, output string) {
	t.Helper()
	var final *chat.Final
	result := ""
	for _, e := range events {
		if e.Event == chat.Done {
			final = e.Final
		}
		if e.Type == chat.TypeToolResult && e.Event == chat.Start {
			result, _ = e.Props["content"].(string)
		}
	}
	if final == nil || final.Error != "" || !strings.Contains(final.Content, "Done: the sandbox says hello.") {
		t.Errorf("%s ended with %+v", what, final)
	}
	if !strings.Contains(result, output) {
		t.Errorf("%s: the Bash result %q lacks %q", what, result, output)
	}
}

func count(events []chat.Event, typ string) int {
	n := 0
	for _, e := range events {
		if e.Type == typ && e.Event == chat.Start {
			n++
		}
	}
	return n
}

// resolved are the props of the approval_resolved messages.
func resolved(events []chat.Event) []map[string]any {
	var out []map[string]any
	for _, e := range events {
		if e.Type == "approval_resolved" && e.Event == chat.Start {
			out = append(out, e.Props)
		}
	}
	return out
}
