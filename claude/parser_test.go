package claude

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

func collect(opts ParserOptions, input string) ([]chat.Event, *Outcome) {
	g, _ := clitest.Collect(strings.NewReader(input), func(emit chat.EmitFunc) clitest.Parser[*Outcome] { return NewParser(emit, opts) })
	return g.Events, g.Outcome
}

// TestHugeToolResult: a 20 MB tool result line neither breaks the stream
// nor reaches the client whole.
func TestHugeToolResult(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 20<<16) // 20 MiB
	// As the CLI prints it: type first.
	line := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"` + big + `"}]}}`
	in := `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}` + "\n" +
		string(line) + "\n" +
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"after"}]}}` + "\n" +
		`{"type":"result","subtype":"success","is_error":false,"num_turns":2,"usage":{"input_tokens":1,"output_tokens":2}}` + "\n"
	evs, out := collect(ParserOptions{}, in)
	var res *chat.Event
	for i := range evs {
		if evs[i].Type == chat.TypeToolResult && evs[i].Event == chat.Start {
			res = &evs[i]
		}
	}
	if res == nil {
		t.Fatal("no tool_result event")
	}
	content := res.Props["content"].(string)
	if len(content) != DefaultMaxEventContent || res.Props["truncated"] != true || res.Props["content_bytes"] != len(big) {
		t.Errorf("content %d bytes, truncated=%v, content_bytes=%v", len(content), res.Props["truncated"], res.Props["content_bytes"])
	}
	if out.Content != "after" || !out.GotResult || out.Usage.OutputTokens != 2 {
		t.Errorf("outcome %+v", out)
	}
}

// TestNoDuplicateText: with partial messages, the whole assistant message
// repeating them adds nothing.
func TestNoDuplicateText(t *testing.T) {
	t.Parallel()
	for _, v := range supportedVersions(t) {
		evs, out := collect(ParserOptions{}, readTestdata(t, v+"/write_bash.jsonl"))
		var c chat.Collector
		for _, e := range evs {
			c.Add(e)
		}
		if c.Text() != out.Content { // one rule joins separate text messages
			t.Errorf("%s: collector %q != outcome %q", v, c.Text(), out.Content)
		}
		if strings.Count(c.Text(), "I'll create hello.txt.") != 1 {
			t.Errorf("%s: text duplicated: %q", v, c.Text())
		}
	}
}

func TestErrorResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		code string
	}{
		{`{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (2)"]}`, chat.ErrMaxTurns},
		{`{"type":"result","subtype":"error_during_execution","is_error":true}`, chat.ErrExecutor},
		{`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"rate limited"}`, chat.ErrRateLimit},
		{`{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"bad key"}`, chat.ErrAuth},
		{`{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"overloaded"}`, chat.ErrUpstream},
		{`{"type":"result","subtype":"error_max_budget_usd","is_error":true}`, chat.ErrExecutor},
	}
	for _, tc := range tests {
		evs, out := collect(ParserOptions{}, tc.line+"\n")
		if out.Err == nil || out.Err.Code != tc.code {
			t.Errorf("%s: err %+v, want code %s", tc.line, out.Err, tc.code)
			continue
		}
		if len(evs) != 2 || evs[0].Type != chat.TypeError || evs[0].Props["code"] != tc.code || evs[0].Text == "" {
			t.Errorf("%s: events %+v", tc.line, evs)
		}
	}
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(testdataDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FuzzParser: no input makes the parser panic, emit an unbalanced stream
// or show a non-JSON line as text.
func FuzzParser(f *testing.F) {
	seeds, _ := filepath.Glob(testdataDir + "/*.jsonl")
	more, _ := filepath.Glob(testdataDir + "/*/*.jsonl")
	for _, name := range append(seeds, more...) {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("not json\n{\"type\":\"stream_event\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		clitest.CheckFuzzed(t, data, func(emit chat.EmitFunc) clitest.Parser[*Outcome] {
			return NewParser(emit, ParserOptions{MaxTurns: 3, Skills: []string{"s"}})
		})
	})
}

// benchTranscript builds a transcript of about size bytes from the shapes
// the CLI prints: streamed text deltas, tool calls, tool results.
func benchTranscript(size int) []byte {
	var b bytes.Buffer
	S := `"session_id":"11111111-2222-4333-8444-555555555555","parent_tool_use_id":null,"uuid":"4a95a8d7-f58a-4463-a27d-fae430ec2a5c"`
	b.WriteString(`{"type":"system","subtype":"init","cwd":"/workspace","session_id":"s","tools":["Bash","Read","Write"],"mcp_servers":[],"model":"m","skills":[]}` + "\n")
	out := strings.Repeat("drwxr-xr-x 2 agent agent 4096 Nov 22 02:39 some-file-name.go\\n", 60)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"message":{"content":[],"id":"msg_%d","model":"m","role":"assistant","type":"message","usage":{"input_tokens":10,"output_tokens":1}},"type":"message_start"},%s}`+"\n", i, S)
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"},%s}`+"\n", S)
		for j := 0; j < 20; j++ {
			fmt.Fprintf(&b, `{"type":"stream_event","event":{"delta":{"text":"word %d of the answer, ","type":"text_delta"},"index":0,"type":"content_block_delta"},%s}`+"\n", j, S)
		}
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"index":0,"type":"content_block_stop"},%s}`+"\n", S)
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"content_block":{"id":"toolu_%d","input":{},"name":"Bash","type":"tool_use"},"index":1,"type":"content_block_start"},%s}`+"\n", i, S)
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"delta":{"partial_json":"{\"command\":\"ls -la\"}","type":"input_json_delta"},"index":1,"type":"content_block_delta"},%s}`+"\n", S)
		fmt.Fprintf(&b, `{"type":"assistant","message":{"content":[{"id":"toolu_%d","input":{"command":"ls -la"},"name":"Bash","type":"tool_use"}],"id":"msg_%d","model":"m","role":"assistant","type":"message"},%s}`+"\n", i, i, S)
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"index":1,"type":"content_block_stop"},%s}`+"\n", S)
		fmt.Fprintf(&b, `{"type":"stream_event","event":{"type":"message_stop"},%s}`+"\n", S)
		fmt.Fprintf(&b, `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_%d","type":"tool_result","content":"%s","is_error":false}]},%s,"tool_use_result":{"stdout":"%s","stderr":""}}`+"\n", i, out, S, out)
	}
	b.WriteString(`{"type":"result","subtype":"success","is_error":false,"num_turns":3,"usage":{"input_tokens":1,"output_tokens":2}}` + "\n")
	return b.Bytes()
}

// parseAll runs a parser over a transcript held in memory, discarding
// the events.
func parseAll(b *testing.B, data []byte) {
	p := NewParser(func(chat.Event) {}, ParserOptions{MaxTurns: 1 << 30})
	if err := p.Parse(bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	p.Close()
}

// benchParse reports, beside the usual figures, emitted-B/op: the bytes
// of text, tool result content and tool input the events carry, plus the
// outcome's answer text. The parser must allocate those; what B/op adds
// to them is its own working memory.
func benchParse(b *testing.B, size int) {
	data := benchTranscript(size)
	emitted := 0
	p := NewParser(func(e chat.Event) {
		emitted += len(e.Text)
		if c, ok := e.Props["content"].(string); ok {
			emitted += len(c)
		}
		if in, ok := e.Props["input"].(chat.RawJSON); ok {
			emitted += len(in)
		}
	}, ParserOptions{MaxTurns: 1 << 30})
	if err := p.Parse(bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	emitted += len(p.Close().Content)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		parseAll(b, data)
	}
	b.ReportMetric(float64(emitted), "emitted-B/op")
}

func BenchmarkParser2MB(b *testing.B)  { benchParse(b, 2<<20) }
func BenchmarkParser20MB(b *testing.B) { benchParse(b, 20<<20) }

// benchHugeResult parses one tool result of size bytes (a command's
// output, printed twice by the CLI as it is): memory must stay near the
// content cap whatever the size.
func benchHugeResult(b *testing.B, size int) {
	out := strings.Repeat("drwxr-xr-x 2 agent agent 4096 Nov 22 02:39 some-file-name.go\\n", size/128)
	data := []byte(`{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]}}` + "\n" +
		`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"` + out +
		`","is_error":false}]},"parent_tool_use_id":null,"tool_use_result":{"stdout":"` + out + `","stderr":""}}` + "\n")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		parseAll(b, data)
	}
}

func BenchmarkParserHugeResult2MB(b *testing.B)  { benchHugeResult(b, 2<<20) }
func BenchmarkParserHugeResult20MB(b *testing.B) { benchHugeResult(b, 20<<20) }

// BenchmarkParserFlood1GB parses a 1.2 GB line (what a process writing to
// the CLI's stdout could produce) and a result: the line is dropped, and
// the parser's memory (B/op) stays near the line cap, not the line.
func BenchmarkParserFlood1GB(b *testing.B) {
	const size = 1200 << 20
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		p := NewParser(func(chat.Event) {}, ParserOptions{})
		r := io.MultiReader(strings.NewReader(`{"type":"assistant","x":"`), &zeros{n: size}, strings.NewReader("\"}\n"+`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"ok"}`+"\n"))
		if err := p.Parse(r); err != nil {
			b.Fatal(err)
		}
		if out := p.Close(); !out.GotResult || out.Dropped != 1 {
			b.Fatalf("outcome %+v", out)
		}
	}
}

// zeros reads n bytes '0'.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), z.n)]
	for i := range p {
		p[i] = '0'
	}
	z.n -= len(p)
	return len(p), nil
}

// BenchmarkEncodingJSON20MB decodes the same lines with encoding/json into
// generic values, the baseline the parser is compared to.
func BenchmarkEncodingJSON20MB(b *testing.B) {
	clitest.BenchmarkDecodeJSON(b, benchTranscript(20<<20))
}

// BenchmarkParserVsEncodingJSON20MB times the parser and the encoding/json
// baseline in turn on the same lines, so both see the same machine load
// (the targets are relative on a shared machine): it reports each one's
// throughput and the parser's speed-up over the baseline.
func BenchmarkParserVsEncodingJSON20MB(b *testing.B) {
	data := benchTranscript(20 << 20)
	var parse, decode time.Duration
	for b.Loop() {
		t0 := time.Now()
		parseAll(b, data)
		t1 := time.Now()
		clitest.DecodeJSONLines(data)
		parse += t1.Sub(t0)
		decode += time.Since(t1)
	}
	mb := float64(len(data)) * float64(b.N) / 1e6
	b.ReportMetric(mb/parse.Seconds(), "parser-MB/s")
	b.ReportMetric(mb/decode.Seconds(), "json-MB/s")
	b.ReportMetric(decode.Seconds()/parse.Seconds(), "x-json")
}

// TestTaskLabels: a long command the agent waits for (is_backgrounded
// false) is a command, not a background one; a task that leaves the field
// out, as CLIs before 2.1.3xx did for their only kind, is in the
// background.
func TestTaskLabels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, want string }{
		{`,"is_backgrounded":false`, "Command: build"},
		{`,"is_backgrounded":true`, "Background command: build"},
		{``, "Background command: build"},
	} {
		in := `{"type":"system","subtype":"task_started","task_id":"k","tool_use_id":"t1","description":"build","task_type":"local_bash"` + tc.flag + "}\n"
		evs, _ := collect(ParserOptions{}, in)
		var got string
		for _, e := range evs {
			if e.Type == chat.TypeLoading && e.Event == chat.Start {
				got = e.Text
			}
		}
		if got != tc.want {
			t.Errorf("task_started%s: %q, want %q", tc.flag, got, tc.want)
		}
	}
}
