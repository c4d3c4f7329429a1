package scripted_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/scripted"
)

type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// post sends a JSON body and returns the response.
func post(t *testing.T, url, body string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readSSE(t *testing.T, r io.Reader) ([]sseEvent, error) {
	t.Helper()
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			_ = json.Unmarshal([]byte(cur.raw), &cur.data)
		case line == "":
			evs = append(evs, cur)
			cur = sseEvent{}
		}
	}
	return evs, sc.Err()
}

func names(evs []sseEvent) string {
	var out []string
	for _, e := range evs {
		n := e.name
		if e.data != nil {
			if d, ok := e.data["delta"].(map[string]any); ok && d["type"] != nil {
				n += ":" + d["type"].(string)
			}
			if b, ok := e.data["content_block"].(map[string]any); ok {
				n += ":" + b["type"].(string)
			}
		}
		out = append(out, n)
	}
	return strings.Join(out, " ")
}

const anthropicBody = `{"model":"claude-test","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`

func TestAnthropicStream(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{
		Thinking:  "Let me think about this request carefully.",
		Text:      "Here is a longer answer that is split into several text deltas.",
		ToolCalls: []scripted.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "/tmp/x.txt", "content": "some content here"}}},
	}}})
	t.Cleanup(srv.Close)
	resp := post(t, srv.URL+"/v1/messages?beta=true", anthropicBody)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	seq := names(evs)
	// Collapse repeated deltas to check the shape of the sequence.
	for _, d := range []string{"thinking_delta", "text_delta", "input_json_delta"} {
		for strings.Contains(seq, "content_block_delta:"+d+" content_block_delta:"+d) {
			seq = strings.ReplaceAll(seq, "content_block_delta:"+d+" content_block_delta:"+d, "content_block_delta:"+d)
		}
	}
	want := "message_start ping content_block_start:thinking content_block_delta:thinking_delta content_block_delta:signature_delta content_block_stop " +
		"content_block_start:text content_block_delta:text_delta content_block_stop " +
		"content_block_start:tool_use content_block_delta:input_json_delta content_block_stop message_delta message_stop"
	if seq != want {
		t.Fatalf("event sequence:\n got %s\nwant %s", seq, want)
	}
	// Reassemble the blocks.
	var text, thinking, input string
	nInput := 0
	for _, e := range evs {
		d, _ := e.data["delta"].(map[string]any)
		switch d["type"] {
		case "text_delta":
			text += d["text"].(string)
		case "thinking_delta":
			thinking += d["thinking"].(string)
		case "input_json_delta":
			input += d["partial_json"].(string)
			nInput++
		}
	}
	if text != "Here is a longer answer that is split into several text deltas." || thinking != "Let me think about this request carefully." {
		t.Errorf("text %q thinking %q", text, thinking)
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(input), &in); err != nil || in["content"] != "some content here" || nInput < 2 {
		t.Errorf("tool input %q in %d chunks: %v", input, nInput, err)
	}
	start := evs[0].data["message"].(map[string]any)
	if !strings.HasPrefix(start["id"].(string), "msg_") || start["model"] != "claude-test" {
		t.Errorf("message_start = %v", start)
	}
	tool := evs[len(evs)-6].data["content_block"]
	for _, e := range evs {
		if b, ok := e.data["content_block"].(map[string]any); ok && b["type"] == "tool_use" {
			tool = b
		}
	}
	if id := tool.(map[string]any)["id"].(string); !strings.HasPrefix(id, "toolu_") {
		t.Errorf("tool id %q", id)
	}
	md := evs[len(evs)-2].data
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"].(float64) < 1 {
		t.Errorf("message_delta = %v", md)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || reqs[0].RawQuery != "beta=true" || reqs[0].LastUserText() != "hello" || reqs[0].Turn != 0 {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestAnthropicNonStreamAndUniqueIDs(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Text: "one", Usage: &scripted.Usage{InputTokens: 7, OutputTokens: 3}},
		{Thinking: "hm", ToolCalls: []scripted.ToolCall{{ID: "toolu_fixed", Name: "Bash", Input: map[string]any{"command": "ls"}}}},
	}})
	t.Cleanup(srv.Close)
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"q"}]}]}`
	var msgs []map[string]any
	for range 2 {
		resp := post(t, srv.URL+"/v1/messages", body)
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		msgs = append(msgs, m)
	}
	if msgs[0]["id"] == msgs[1]["id"] {
		t.Errorf("two responses share message id %v", msgs[0]["id"])
	}
	if u := msgs[0]["usage"].(map[string]any); u["input_tokens"] != 7.0 || u["output_tokens"] != 3.0 {
		t.Errorf("usage = %v", u)
	}
	c := msgs[1]["content"].([]any)
	if len(c) != 2 || c[0].(map[string]any)["type"] != "thinking" || c[1].(map[string]any)["id"] != "toolu_fixed" || msgs[1]["stop_reason"] != "tool_use" {
		t.Errorf("content = %v stop %v", c, msgs[1]["stop_reason"])
	}
	// Exhausted: 400 invalid_request_error.
	resp := post(t, srv.URL+"/v1/messages", body)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "invalid_request_error") || !strings.Contains(string(b), "llmtest: script has no more turns") {
		t.Errorf("exhausted: %d %s", resp.StatusCode, b)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Error: &scripted.HTTPError{Status: 529}},
		{Error: &scripted.HTTPError{Status: 429, RetryAfter: 3, Message: "slow down"}},
		{Error: &scripted.HTTPError{Status: 500}},
	}})
	t.Cleanup(srv.Close)
	tests := []struct {
		url, body, typ, retry string
		status                int
	}{
		{srv.URL + "/v1/messages", anthropicBody, `"type":"overloaded_error"`, "", 529},
		{srv.URL + "/v1/messages", anthropicBody, `"message":"slow down"`, "3", 429},
		{srv.URL + "/v1/chat/completions", `{"model":"m","messages":[]}`, `"type":"server_error"`, "", 500},
	}
	for _, tt := range tests {
		resp := post(t, tt.url, tt.body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.typ) || resp.Header.Get("Retry-After") != tt.retry {
			t.Errorf("%s: got %d %s retry-after %q", tt.url, resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
	}
}

func TestOpenAIStream(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{
		Thinking:  "reasoning here",
		Text:      "Hello from the scripted server.",
		ToolCalls: []scripted.ToolCall{{Name: "get_weather", Input: map[string]any{"city": "Paris"}}},
	}}})
	t.Cleanup(srv.Close)
	resp := post(t, srv.URL+"/v1/chat/completions", `{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	evs, err := readSSE(t, resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if evs[len(evs)-1].raw != "[DONE]" {
		t.Fatalf("last event %q, want [DONE]", evs[len(evs)-1].raw)
	}
	var text, reasoning, args, finish string
	var toolName, toolID string
	var usage map[string]any
	for _, e := range evs[:len(evs)-1] {
		if e.data["object"] != "chat.completion.chunk" {
			t.Fatalf("chunk object %v", e.data["object"])
		}
		if u, ok := e.data["usage"].(map[string]any); ok {
			usage = u
		}
		for _, c := range e.data["choices"].([]any) {
			ch := c.(map[string]any)
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
			d := ch["delta"].(map[string]any)
			if s, ok := d["content"].(string); ok {
				text += s
			}
			if s, ok := d["reasoning_content"].(string); ok {
				reasoning += s
			}
			if tcs, ok := d["tool_calls"].([]any); ok {
				tc := tcs[0].(map[string]any)
				if id, ok := tc["id"].(string); ok {
					toolID = id
					toolName = tc["function"].(map[string]any)["name"].(string)
				}
				args += tc["function"].(map[string]any)["arguments"].(string)
			}
		}
	}
	if text != "Hello from the scripted server." || reasoning != "reasoning here" || finish != "tool_calls" {
		t.Errorf("text %q reasoning %q finish %q", text, reasoning, finish)
	}
	if toolName != "get_weather" || !strings.HasPrefix(toolID, "toolu_") || args != `{"city":"Paris"}` {
		t.Errorf("tool %q %q args %q", toolName, toolID, args)
	}
	if usage == nil || usage["total_tokens"].(float64) < 2 {
		t.Errorf("usage chunk = %v", usage)
	}
}

func TestOpenAINonStream(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{ToolCalls: []scripted.ToolCall{{ID: "call_1", Name: "lookup", Input: map[string]any{"q": "x"}}}},
		{When: &scripted.Match{AfterToolResult: "lookup"}, Text: "found it"},
	}})
	t.Cleanup(srv.Close)
	resp := post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"find x"}]}`)
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || c.Choices[0].FinishReason != "tool_calls" || c.Choices[0].Message.Content != nil ||
		c.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"q":"x"}` {
		t.Fatalf("completion = %+v", c)
	}
	resp = post(t, srv.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"find x"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"x is here"}]}`)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"content":"found it"`) {
		t.Fatalf("second response %s", b)
	}
	trs := srv.Requests()[1].ToolResults()
	if len(trs) != 1 || trs[0].Tool != "lookup" || trs[0].ContentText() != "x is here" {
		t.Errorf("tool results %+v", trs)
	}
}

func TestWhenPicksMatchingTurn(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "after bash"},
		{When: &scripted.Match{Contains: "weather"}, Text: "sunny"},
		{Text: "plain"},
	}})
	t.Cleanup(srv.Close)
	ask := func(body string) string {
		resp := post(t, srv.URL+"/v1/messages", body)
		var m struct {
			Content []struct{ Text string }  `json:"content"`
			Error   struct{ Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		if len(m.Content) == 0 {
			return "error: " + m.Error.Message
		}
		return m.Content[0].Text
	}
	if got := ask(`{"messages":[{"role":"user","content":"hello"}]}`); got != "plain" {
		t.Errorf("first = %q", got)
	}
	if got := ask(`{"messages":[{"role":"user","content":"what is the weather"},{"role":"system","content":"reminder"}]}`); got != "sunny" {
		t.Errorf("second = %q", got)
	}
	if got := ask(`{"messages":[{"role":"user","content":"x"}]}`); !strings.Contains(got, "none of the 1 remaining turns matches") {
		t.Errorf("third = %q", got)
	}
	bash := `{"messages":[{"role":"user","content":"run"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"ok"}]}]}]}`
	if got := ask(bash); got != "after bash" {
		t.Errorf("fourth = %q", got)
	}
	if srv.Remaining() != 0 {
		t.Errorf("Remaining = %d", srv.Remaining())
	}
}

// TestPromptContainsFollowsTheAgentLoop: prompt_contains still matches on
// the requests after a tool result of that prompt's loop (the tool results
// and the text a CLI adds beside them are not the prompt), so a script
// tells one prompt's loop from another's.
func TestPromptContainsFollowsTheAgentLoop(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{AfterToolResult: "Bash", PromptContains: "by name"}, Text: "greets by name"},
		{When: &scripted.Match{AfterToolResult: "Bash"}, Text: "after bash"},
	}})
	t.Cleanup(srv.Close)
	ask := func(prompt string) string {
		return answerText(t, srv.URL, `{"messages":[{"role":"user","content":"`+prompt+`"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"<reminder>"}]}]}`)
	}
	if got := ask("write a greeting"); got != "after bash" {
		t.Errorf("other prompt's loop = %q, want the plain turn", got)
	}
	if got := ask("make it greet me by name"); got != "greets by name" {
		t.Errorf("by-name loop = %q", got)
	}
	if _, err := scripted.ParseScript([]byte("turns:\n  - when: {prompt_contains: x}\n    text: y\n"), "yaml"); err != nil {
		t.Errorf("prompt_contains alone: %v", err)
	}
}

// TestSeesMatchesTheNewMessages: sees matches the text the request added
// after the model's latest answer, a system message's included (how
// Claude Code hands the model a message sent into a running turn), and
// not what came before that answer.
func TestSeesMatchesTheNewMessages(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{When: &scripted.Match{Sees: "use tabs"}, Text: "steered"},
		{When: &scripted.Match{Sees: "use tabs"}, Text: "steered again"},
		{Text: "plain"},
	}})
	t.Cleanup(srv.Close)
	// ask sends before, the model's tool call, its result (output) and a
	// system message (added).
	ask := func(before, output, added string) string {
		return answerText(t, srv.URL, `{"messages":[{"role":"user","content":"`+before+`"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"`+output+`"}]},{"role":"system","content":"`+added+`"}]}`)
	}
	if got := ask("use tabs", "ok", "nothing new"); got != "plain" {
		t.Errorf("text before the answer matched: %q", got)
	}
	if got := ask("format it", "ok", "The user sent a new message while you were working:\\nuse tabs"); got != "steered" {
		t.Errorf("system message after the tool result = %q, want steered", got)
	}
	if got := ask("format it", "ok\\n<system-reminder>use tabs</system-reminder>", "nothing new"); got != "steered again" {
		t.Errorf("a reminder in the tool result = %q, want steered again", got)
	}
}

// answerText posts an Anthropic Messages request body to the server at
// url and returns the text of the answer's first block.
func answerText(t *testing.T, url, body string) string {
	t.Helper()
	var m struct {
		Content []struct{ Text string } `json:"content"`
	}
	_ = json.NewDecoder(post(t, url+"/v1/messages", body).Body).Decode(&m)
	if len(m.Content) == 0 {
		return ""
	}
	return m.Content[0].Text
}

func TestSideRequestsDoNotConsumeTurns(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "main answer"}}})
	t.Cleanup(srv.Close)
	cli := []string{"User-Agent", "claude-cli/2.1.197 (external, sdk-cli)", "X-App", "cli"}
	title := `{"model":"m","stream":true,"max_tokens":64000,"tools":[],"thinking":{"type":"disabled"},"output_config":{"format":{"type":"json_schema","schema":{}}},"messages":[{"role":"user","content":"t"}]}`
	resp := post(t, srv.URL+"/v1/messages?beta=true", title, cli...)
	evs, _ := readSSE(t, resp.Body)
	var text string
	for _, e := range evs {
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text += d["text"].(string)
		}
	}
	if text != `{"title":"llmtest session"}` {
		t.Errorf("title reply %q", text)
	}
	quota := `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"quota"}]}`
	post(t, srv.URL+"/v1/messages", quota, cli...)
	post(t, srv.URL+"/v1/messages/count_tokens", `{"messages":[]}`, cli...)
	if srv.Remaining() != 1 {
		t.Fatalf("side requests consumed turns: Remaining = %d", srv.Remaining())
	}
	main := `{"model":"m","max_tokens":64000,"tools":[{"name":"Write","input_schema":{}}],"context_management":{},"messages":[{"role":"user","content":"go"}]}`
	b, _ := io.ReadAll(post(t, srv.URL+"/v1/messages", main, cli...).Body)
	if !strings.Contains(string(b), "main answer") || srv.Remaining() != 0 {
		t.Errorf("main request got %s", b)
	}
	// The same tool-less request from a non-CLI client is a turn.
	b, _ = io.ReadAll(post(t, srv.URL+"/v1/messages", quota).Body)
	if !strings.Contains(string(b), "no more turns") {
		t.Errorf("non-CLI request should take a turn: %s", b)
	}
	var side int
	for _, r := range srv.Requests() {
		if r.Side {
			side++
		}
	}
	if side != 3 {
		t.Errorf("side requests recorded = %d, want 3", side)
	}
}

func TestStallCutDelay(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{
		{Stall: true},
		{Text: "cut me off please, this is long enough", CutAfter: 3},
		{Text: "late", Delay: scripted.Duration(150 * time.Millisecond)},
	}})
	t.Cleanup(srv.Close)

	// Stall: headers and message_start arrive, then nothing until cancel.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(anthropicBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, _ := br.ReadString('\n')
	if line != "event: message_start\n" {
		t.Fatalf("stall first line %q", line)
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err = io.ReadAll(br)
	if err == nil || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("stalled stream ended early: %v after %v", err, time.Since(start))
	}
	resp.Body.Close()

	// Cut: three events, then a broken stream (no message_stop).
	resp = post(t, srv.URL+"/v1/messages", anthropicBody)
	evs, err := readSSE(t, resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut stream ended with %v, want a broken stream (unexpected EOF)", err)
	}
	if len(evs) != 3 {
		t.Errorf("cut stream: %d events, want 3 (%s)", len(evs), names(evs))
	}

	start = time.Now()
	resp = post(t, srv.URL+"/v1/messages", anthropicBody)
	_, _ = io.ReadAll(resp.Body)
	if time.Since(start) < 150*time.Millisecond {
		t.Errorf("delay not applied: %v", time.Since(start))
	}
}

func TestCloseUnblocksStall(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Stall: true}}})
	resp := post(t, srv.URL+"/v1/messages", anthropicBody)
	done := make(chan struct{})
	go func() {
		_, _ = io.ReadAll(resp.Body)
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	srv.Close()
	srv.Close() // idempotent
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the stalled response")
	}
}

func TestHandlerMountsElsewhere(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "mounted"}}})
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	b, _ := io.ReadAll(post(t, hs.URL+"/v1/messages", `{"messages":[]}`).Body)
	if !strings.Contains(string(b), "mounted") || len(srv.Requests()) != 1 {
		t.Errorf("got %s", b)
	}
	resp, err := http.Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) == 0 {
		t.Errorf("models: %v %+v", err, list)
	}
}
