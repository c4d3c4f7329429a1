package cursor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

func collect(opts ParserOptions, input string) ([]chat.Event, *Outcome) {
	g, _ := clitest.Collect(strings.NewReader(input), func(emit chat.EmitFunc) clitest.Parser[*Outcome] { return NewParser(emit, opts) })
	return g.Events, g.Outcome
}

// textOf is what a client shows: each text message's text, in order.
func textOf(evs []chat.Event) []string {
	var out []string
	idx := map[string]int{}
	for _, e := range evs {
		if e.Type != chat.TypeText {
			continue
		}
		switch e.Event {
		case chat.Start:
			idx[e.ID] = len(out)
			out = append(out, e.Text)
		case chat.Delta:
			out[idx[e.ID]] += e.Text
		}
	}
	return out
}

func asst(text string, extra string) string {
	b, _ := json.Marshal(text)
	return `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":` + string(b) + `}]},"session_id":"s"` + extra + "}\n"
}

// TestAssistantDedupe covers the three documented kinds of assistant
// events under --stream-partial-output and text that repeats or does not
// extend what was shown.
func TestAssistantDedupe(t *testing.T) {
	t.Parallel()
	const ts = `,"timestamp_ms":1`
	const flushTool = `,"timestamp_ms":2,"model_call_id":"m"`
	tool := `{"type":"tool_call","subtype":"started","call_id":"c","tool_call":{"readToolCall":{"args":{"path":"a"}}}}` + "\n"
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"deltas then final flush", asst("Hel", ts) + asst("lo", ts) + asst("Hello", ""), []string{"Hello"}},
		{"flush before tool skipped", asst("Reading", ts) + asst("Reading", flushTool) + tool + asst("Done", ts) + asst("Done", ""), []string{"Reading", "Done"}},
		{"flush adds the unstreamed tail", asst("Reading the", ts) + asst("Reading the file.", flushTool), []string{"Reading the file."}},
		{"flush shorter than streamed", asst("Reading the file", ts) + asst("Reading", ""), []string{"Reading the file"}},
		{"whole messages without partials", asst("One.", "") + tool + asst("Two.", ""), []string{"One.", "Two."}},
		{"message that does not extend", asst("Draft answer", ts) + asst("Final answer", ""), []string{"Draft answer", "Final answer"}},
		{"final flush repeats the whole turn", asst("First part. ", ts) + asst("First part. ", flushTool) + tool + asst("Second.", ts) + asst("First part. Second.", ""), []string{"First part. ", "Second."}},
		{"cumulative deltas", asst("The answer is forty", ts) + asst("The answer is forty-two", ts) + asst("The answer is forty-two", ts), []string{"The answer is forty-two"}},
		{"short delta that begins like the text", asst("I", ts) + asst("I think", ts), []string{"II think"}},
		{"empty texts", asst("", ts) + asst("", "") + asst("x", ""), []string{"x"}},
		{"user starts a new turn", asst("Same.", "") + `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"again"}]}}` + "\n" + asst("Same.", ""), []string{"Same.", "Same."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs, out := collect(ParserOptions{}, tc.in)
			got := textOf(evs)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("text messages %q, want %q", got, tc.want)
			}
			if out.Content != strings.Join(tc.want, "\n\n") {
				t.Errorf("content %q", out.Content)
			}
			chattest.Check(t, evs)
		})
	}
}

func TestToolResults(t *testing.T) {
	t.Parallel()
	line := func(kind, args, result string) string {
		return `{"type":"tool_call","subtype":"started","call_id":"c","tool_call":{"` + kind + `":{"args":` + args + `}}}` + "\n" +
			`{"type":"tool_call","subtype":"completed","call_id":"c","tool_call":{"` + kind + `":{"args":` + args + `,"result":` + result + `}}}` + "\n"
	}
	tests := []struct {
		name, in, tool, content string
		isErr                   bool
	}{
		{"read", line("readToolCall", `{"path":"a"}`, `{"success":{"content":"A\n"}}`), "read", "A\n", false},
		{"shell ok", line("shellToolCall", `{"command":"ls"}`, `{"success":{"exitCode":0,"stdout":"a\n","stderr":""}}`), "shell", "a\n", false},
		{"shell non-zero", line("shellToolCall", `{"command":"false"}`, `{"success":{"exitCode":1,"stdout":"","stderr":"bad"}}`), "shell", "bad\nexit code 1", true},
		{"shell failure", line("shellToolCall", `{"command":"x"}`, `{"failure":{"exitCode":127,"stdout":"","stderr":"x: not found\n"}}`), "shell", "x: not found\nexit code 127", true},
		{"error string", line("deleteToolCall", `{"path":"a"}`, `{"error":"nope"}`), "delete", "nope", true},
		{"error object", line("editToolCall", `{"path":"a"}`, `{"error":{"errorMessage":"stale"}}`), "edit", "stale", true},
		{"rejected", line("writeToolCall", `{"path":"a"}`, `{"rejected":{"reason":"denied"}}`), "write", "denied", true},
		{"unknown failure shape", line("globToolCall", `{}`, `{"timeout":{"ms":5}}`), "glob", `timeout: {"ms":5}`, true},
		{"unknown kind", line("brandNewToolCall", `{"q":1}`, `{"success":{"n":1}}`), "brandNewToolCall", `{"n":1}`, false},
		{"mcp", line("mcpToolCall", `{"providerIdentifier":"gh","toolName":"issues"}`, `{"success":{"content":[{"text":{"text":"a"}},{"type":"text","text":"b"}]}}`), "mcp__gh__issues", "a\nb", false},
		{"mcp without names", line("mcpToolCall", `{}`, `{"success":{"content":[]}}`), "mcp", "", false},
		{"no result", line("lsToolCall", `{}`, `null`), "ls", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			evs, out := collect(ParserOptions{}, tc.in)
			if len(out.ToolCalls) != 1 {
				t.Fatalf("tool calls %+v", out.ToolCalls)
			}
			tc0 := out.ToolCalls[0]
			if tc0.Name != tc.tool || tc0.Result != tc.content || tc0.IsError != tc.isErr {
				t.Errorf("got %q %q err=%v, want %q %q err=%v", tc0.Name, tc0.Result, tc0.IsError, tc.tool, tc.content, tc.isErr)
			}
			chattest.Check(t, evs)
		})
	}
}

func TestFunctionTool(t *testing.T) {
	t.Parallel()
	in := `{"type":"tool_call","subtype":"started","call_id":"f","tool_call":{"function":{"name":"lookup","arguments":"not json"}}}` + "\n"
	_, out := collect(ParserOptions{}, in)
	if len(out.ToolCalls) != 1 || out.ToolCalls[0].Name != "lookup" || string(out.ToolCalls[0].Input) != `{"arguments":"not json"}` {
		t.Errorf("tool calls %+v", out.ToolCalls)
	}
}

// TestHugeLines: a 20 MB tool result line neither breaks the stream nor
// reaches the client whole; a 3 MB assistant line is shown in full.
func TestHugeLines(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 20<<16) // 20 MiB
	// As the CLI prints it: type first.
	res := `{"type":"tool_call","subtype":"completed","call_id":"r","tool_call":{"readToolCall":{"args":{"path":"big"},"result":{"success":{"content":"` + big + `"}}}}}`
	long := strings.Repeat("word ", 3<<20/5)
	in := `{"type":"tool_call","subtype":"started","call_id":"r","tool_call":{"readToolCall":{"args":{"path":"big"}}}}` + "\n" +
		string(res) + "\n" + asst(long, "") +
		`{"type":"result","subtype":"success","is_error":false,"result":"x","session_id":"s"}` + "\n"
	evs, out := collect(ParserOptions{}, in)
	var content string
	var props map[string]any
	for _, e := range evs {
		if e.Type == chat.TypeToolResult && e.Event == chat.Start {
			props = e.Props
			content = e.Props["content"].(string)
		}
	}
	if len(content) != DefaultMaxEventContent || props["truncated"] != true || props["content_bytes"] != len(big) {
		t.Errorf("content %d bytes, truncated=%v, content_bytes=%v", len(content), props["truncated"], props["content_bytes"])
	}
	if len(out.ToolCalls[0].Result) != agentcli.MaxKeptResult {
		t.Errorf("kept result %d bytes", len(out.ToolCalls[0].Result))
	}
	if out.Content != long || !out.GotResult {
		t.Errorf("content %d bytes, result %v", len(out.Content), out.GotResult)
	}
}

func TestErrorResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		code string
	}{
		{`{"type":"result","subtype":"error","is_error":true,"result":"Authentication required. Please run 'agent login' or set CURSOR_API_KEY"}`, chat.ErrAuth},
		{`{"type":"result","subtype":"error","is_error":true,"result":"Rate limit exceeded"}`, chat.ErrRateLimit},
		{`{"type":"result","subtype":"error","is_error":true,"result":"getaddrinfo ENOTFOUND api2.cursor.sh"}`, chat.ErrNetwork},
		{`{"type":"result","subtype":"error","is_error":true,"result":"Model 'gpt-9' not found"}`, chat.ErrInvalidRequest},
		{`{"type":"result","subtype":"error_during_execution","is_error":true}`, chat.ErrExecutor},
		{`{"type":"result","subtype":"success","is_error":true,"error":{"message":"boom"}}`, chat.ErrExecutor},
	}
	for _, tc := range tests {
		evs, out := collect(ParserOptions{}, tc.line+"\n")
		if out.Err == nil || out.Err.Code != tc.code || out.Err.Message == "" {
			t.Errorf("%s: err %+v, want code %s", tc.line, out.Err, tc.code)
			continue
		}
		if len(evs) != 2 || evs[0].Type != chat.TypeError || evs[0].Props["code"] != tc.code {
			t.Errorf("%s: events %+v", tc.line, evs)
		}
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testdataDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzParser: no input makes the parser panic, emit an unbalanced stream
// or show a non-JSON line as text.
func FuzzParser(f *testing.F) {
	for _, name := range []string{"docs_example.jsonl", "partial_output.jsonl", "edge_repeated_partial.jsonl", "edge_noise.jsonl", "tool_kinds.jsonl", "missing_result.jsonl"} {
		f.Add(readTestdata(f, name))
	}
	f.Add([]byte("not json\n{\"type\":\"tool_call\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*Outcome] {
			return NewParser(emit, ParserOptions{Skills: []string{"s"}})
		})
	})
}

// benchTranscript builds a transcript of about size bytes from the shapes
// the CLI prints with partial output: text deltas, a flush, tool calls
// with results.
func benchTranscript(size int) []byte {
	var b bytes.Buffer
	const S = `"session_id":"c6b62c6f-7ead-4fd6-9922-e952131177ff"`
	b.WriteString(`{"type":"system","subtype":"init","apiKeySource":"env","cwd":"/workspace",` + S + `,"model":"GPT-5","permissionMode":"default"}` + "\n")
	out := strings.Repeat("drwxr-xr-x 2 agent agent 4096 Nov 22 02:39 some-file-name.go\\n", 60)
	for i := 0; b.Len() < size; i++ {
		var seg strings.Builder
		for j := 0; j < 20; j++ {
			w := fmt.Sprintf("word %d of the answer, ", j)
			seg.WriteString(w)
			fmt.Fprintf(&b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"%s"}]},%s,"timestamp_ms":%d}`+"\n", w, S, 1760000000000+j)
		}
		fmt.Fprintf(&b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"%s"}]},%s,"timestamp_ms":1,"model_call_id":"m-%d"}`+"\n", seg.String(), S, i)
		fmt.Fprintf(&b, `{"type":"tool_call","subtype":"started","call_id":"toolu_%d","tool_call":{"shellToolCall":{"args":{"command":"ls -la"}}},%s}`+"\n", i, S)
		fmt.Fprintf(&b, `{"type":"tool_call","subtype":"completed","call_id":"toolu_%d","tool_call":{"shellToolCall":{"args":{"command":"ls -la"},"result":{"success":{"command":"ls -la","exitCode":0,"stdout":"%s","stderr":""}}}},%s}`+"\n", i, out, S)
	}
	b.WriteString(`{"type":"result","subtype":"success","duration_ms":1,"duration_api_ms":1,"is_error":false,"result":"x",` + S + `}` + "\n")
	return b.Bytes()
}

func benchParse(b *testing.B, size int) {
	data := benchTranscript(size)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		p := NewParser(func(chat.Event) {}, ParserOptions{})
		if err := p.Parse(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		p.Close()
	}
}

func BenchmarkParser2MB(b *testing.B)  { benchParse(b, 2<<20) }
func BenchmarkParser20MB(b *testing.B) { benchParse(b, 20<<20) }

// BenchmarkEncodingJSON20MB decodes the same lines with encoding/json into
// generic values, the baseline the parser is compared to.
func BenchmarkEncodingJSON20MB(b *testing.B) {
	clitest.BenchmarkDecodeJSON(b, benchTranscript(20<<20))
}

// TestClassify: the CLI's failure messages get their codes by their words;
// a process's own "permission denied" is no authentication failure.
func TestClassify(t *testing.T) {
	t.Parallel()
	for msg, want := range map[string]string{
		"Error: Not logged in. Run agent login.":  chat.ErrAuth,
		"request failed: 403 Forbidden":           chat.ErrAuth,
		"You have hit your usage limit":           chat.ErrRateLimit,
		"getaddrinfo ENOTFOUND api2.cursor.sh":    chat.ErrNetwork,
		"Model gpt-9 not found":                   chat.ErrInvalidRequest,
		"bash: /etc/shadow: Permission denied":    chat.ErrExecutor,
		"the agent stopped for an unknown reason": chat.ErrExecutor,
	} {
		if got := classify(msg); got != want {
			t.Errorf("classify(%q) = %s, want %s", msg, got, want)
		}
	}
}
