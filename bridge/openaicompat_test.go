package bridge

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/scripted"
)

func TestMessagesToChat(t *testing.T) {
	t.Parallel()
	in := `{"model":"claude-x","max_tokens":100,"temperature":0.5,"stream":true,"stop_sequences":["END"],
	 "system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Use tools.","cache_control":{"type":"ephemeral"}}],
	 "tools":[{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}},
	          {"type":"web_search_20250305","name":"web_search"}],
	 "tool_choice":{"type":"any","disable_parallel_tool_use":true},
	 "messages":[
	  {"role":"user","content":"hi"},
	  {"role":"system","content":"a reminder"},
	  {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"Running."},
	    {"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a.txt"}]},
	    {"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"denied"},
	    {"type":"text","text":"and this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`
	out, err := messagesToChat([]byte(in), "deepseek-chat")
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(out)
	for path, want := range map[string]string{
		"model":                        "deepseek-chat",
		"max_tokens":                   "100",
		"temperature":                  "0.5",
		"stop.0":                       "END",
		"stream_options.include_usage": "true",
		"tools.#":                      "1",
		"tools.0.function.name":        "Bash",
		"tools.0.function.parameters.properties.command.type": "string",
		"tool_choice":                                "required",
		"parallel_tool_calls":                        "false",
		"messages.#":                                 "7",
		"messages.0.role":                            "system",
		"messages.0.content":                         "Be brief.\n\nUse tools.",
		"messages.1.content":                         "hi",
		"messages.2.role":                            "system",
		"messages.3.content":                         "Running.",
		"messages.3.tool_calls.0.id":                 "toolu_1",
		"messages.3.tool_calls.0.function.arguments": `{"command":"ls"}`,
		"messages.4.role":                            "tool",
		"messages.4.content":                         "a.txt",
		"messages.5.tool_call_id":                    "toolu_2",
		"messages.5.content":                         "Error: denied",
		"messages.6.content.0.text":                  "and this",
		"messages.6.content.1.image_url.url":         "data:image/png;base64,AAAA",
	} {
		if got := r.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	for _, bad := range []string{`nope`, `[1]`, `{"messages":[{"role":"tool","content":"x"}]}`} {
		if _, err := messagesToChat([]byte(bad), ""); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestChatToMessage(t *testing.T) {
	t.Parallel()
	out, err := chatToMessage([]byte(`{"id":"c1","model":"m","choices":[{"finish_reason":"tool_calls","message":{"content":"Looking.",
	  "tool_calls":[{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"ls\"}"}},
	                {"id":"call_2","type":"function","function":{"name":"Read","arguments":"not json"}}]}}],
	  "usage":{"prompt_tokens":12,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":5}}}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(out)
	for path, want := range map[string]string{
		"type": "message", "stop_reason": "tool_use", "content.0.text": "Looking.", "content.1.type": "tool_use",
		"content.1.input.command": "ls", "content.2.input": "{}", "usage.input_tokens": "7", "usage.output_tokens": "7",
		"usage.cache_read_input_tokens": "5",
	} {
		if got := r.Get(path).String(); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
}

// The stream the scripted model sends for a turn with thinking, text and a tool call
// becomes the Messages API's events, in order, with the usage.
func TestTranslateChatStream(t *testing.T) {
	t.Parallel()
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Thinking: "Plan.", Text: "Listing.",
		ToolCalls: []scripted.ToolCall{{Name: "Bash", Input: map[string]any{"command": "ls -la"}}, {Name: "Read", Input: map[string]any{"file_path": "a"}}}}}})
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if err := translateChatStream(&out, resp.Body, "m"); err != nil {
		t.Fatal(err)
	}
	var kinds, blocks []string
	inputs := map[int]string{}
	var stop string
	var usage gjson.Result
	for _, line := range strings.Split(out.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		e := gjson.Parse(data)
		kinds = append(kinds, e.Get("type").String())
		switch e.Get("type").String() {
		case "content_block_start":
			blocks = append(blocks, e.Get("content_block.type").String())
		case "content_block_delta":
			if e.Get("delta.type").String() == "input_json_delta" {
				inputs[int(e.Get("index").Int())] += e.Get("delta.partial_json").String()
			}
		case "message_delta":
			stop, usage = e.Get("delta.stop_reason").String(), e.Get("usage")
		}
	}
	if kinds[0] != "message_start" || kinds[len(kinds)-1] != "message_stop" {
		t.Errorf("events %v", kinds)
	}
	if strings.Join(blocks, ",") != "thinking,text,tool_use,tool_use" {
		t.Errorf("blocks %v", blocks)
	}
	var in map[string]any
	if err := json.Unmarshal([]byte(inputs[2]), &in); err != nil || in["command"] != "ls -la" {
		t.Errorf("first tool's input %q: %v", inputs[2], err)
	}
	if stop != "tool_use" || usage.Get("input_tokens").Int() == 0 || usage.Get("output_tokens").Int() == 0 {
		t.Errorf("stop %q usage %s", stop, usage.Raw)
	}
}

// Through a session: the CLI's Messages call on an openai connector goes
// to Chat Completions with the connector's key as a bearer token, comes
// back in the Messages shape and is metered; an upstream error keeps its
// status in the Messages error shape; token counts are estimated here.
func TestProxyOpenAIConnector(t *testing.T) {
	srv := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "Hello there."}, {Text: "Whole."},
		{Error: &scripted.HTTPError{Status: 401, Type: "authentication_error", Message: "bad key"}}}})
	t.Cleanup(srv.Close)
	s := startSession(t, Options{Upstream: executor.Connection{Type: "openai", Host: srv.URL, Key: realKey, Model: "gpt-x"}})
	c := unixClient(s)

	resp := post(t, c, "http://bridge", "/v1/messages?beta=true", s.Token(), `{"model":"claude","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"text":"Hello there."`) || !strings.Contains(string(body), "event: message_stop") {
		t.Fatalf("stream: %d %s", resp.StatusCode, body)
	}
	reqs := srv.Requests()
	if last := reqs[len(reqs)-1]; last.Path != "/v1/chat/completions" || last.RawQuery != "" || last.Header.Get("Authorization") != "Bearer "+realKey ||
		!bytes.Contains(last.Body, []byte(`"model":"gpt-x"`)) {
		t.Errorf("upstream request: %s %s?%s auth=%q %s", last.Method, last.Path, last.RawQuery, last.Header.Get("Authorization"), last.Body)
	}
	if u := s.Usage(); u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Errorf("usage not metered: %+v", u)
	}

	resp = post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || gjson.GetBytes(body, "content.0.text").String() != "Whole." {
		t.Fatalf("whole: %d %s", resp.StatusCode, body)
	}

	resp = post(t, c, "http://bridge", "/v1/messages", s.Token(), `{"model":"claude","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || gjson.GetBytes(body, "error.type").String() != "authentication_error" || !strings.Contains(string(body), "bad key") {
		t.Fatalf("error: %d %s", resp.StatusCode, body)
	}

	resp = post(t, c, "http://bridge", "/v1/messages/count_tokens", s.Token(), `{"model":"claude","messages":[{"role":"user","content":"count these words"}]}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || gjson.GetBytes(body, "input_tokens").Int() == 0 {
		t.Fatalf("count_tokens: %d %s", resp.StatusCode, body)
	}
}
