package claude

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// parseElided parses input with a line reader that reads small chunks and
// elides lines longer than after bytes; it returns the events, outcome
// and the longest line the parser was handed.
func parseElided(input string, opts ParserOptions, after int) ([]chat.Event, *Outcome, int) {
	var rec chattest.Recorder
	p := NewParser(rec.Emit, opts)
	lr := newLineReaderSize(clitest.ChunkReader(input, 1000), 16)
	lr.keep = p.opts.MaxEventContent + 16
	lr.elide = isUserLine
	lr.elideAfter = after
	longest := 0
	for {
		line, err := lr.next()
		if err != nil {
			break
		}
		longest = max(longest, len(line))
		if cuts := lr.cuts(); len(cuts) > 0 && len(line) > 0 {
			p.cuts = cutIndex{base: uintptrOf(line), cuts: cuts}
		}
		p.Line(line)
		p.cuts = cutIndex{}
	}
	out := p.Close()
	return rec.Events(), out, longest
}

// parseWhole hands the parser every line whole.
func parseWhole(input string, opts ParserOptions) ([]chat.Event, *Outcome) {
	var rec chattest.Recorder
	p := NewParser(rec.Emit, opts)
	for _, l := range strings.Split(strings.TrimSuffix(input, "\n"), "\n") {
		p.Line([]byte(l))
	}
	out := p.Close()
	return rec.Events(), out
}

func toolResultLine(content string) string {
	return `{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":` + content +
		`,"is_error":false}]},"parent_tool_use_id":null,"tool_use_result":{"stdout":` + content + `}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestElidedLines: a huge tool result line parsed with its strings cut
// short gives the same events as the whole line, while the parser is
// handed only a bounded part of it.
func TestElidedLines(t *testing.T) {
	t.Parallel()
	const max = 100
	tests := []struct {
		name    string
		content string // raw JSON
	}{
		{"plain", jsonString(strings.Repeat("abcdefghij", 500))},
		{"newlines", jsonString(strings.Repeat("line of output\n", 400))},
		{"quotes and backslashes", jsonString(strings.Repeat(`say "hi" \ `, 500))},
		{"unicode escapes", `"` + strings.Repeat(`\u00e9\u4e2d`, 600) + `"`},
		{"surrogate pairs", `"` + strings.Repeat(`\ud83d\ude00x`, 600) + `"`},
		{"lone surrogates", `"` + strings.Repeat(`\ud83d\u0041\ude00yz\ud83dq`, 300) + `"`},
		{"utf-8", jsonString(strings.Repeat("é中😀", 700))},
		{"blocks", `[{"type":"text","text":` + jsonString(strings.Repeat("first block ", 300)) + `},{"type":"image"},{"type":"text","text":` + jsonString(strings.Repeat("second\n", 300)) + `}]`},
		{"short", jsonString("small")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]}}` + "\n" +
				toolResultLine(tc.content) + "\n" +
				`{"type":"result","subtype":"success","is_error":false,"num_turns":2}` + "\n"
			opts := ParserOptions{MaxEventContent: max}
			wantEv, wantOut := parseWhole(in, opts)
			gotEv, gotOut, longest := parseElided(in, opts, 64)
			if !reflect.DeepEqual(gotEv, wantEv) {
				t.Errorf("events differ\ngot  %v\nwant %v", gotEv, wantEv)
			}
			if !reflect.DeepEqual(gotOut, wantOut) {
				t.Errorf("outcome differs\ngot  %+v\nwant %+v", gotOut, wantOut)
			}
			t.Logf("line %d bytes, handed %d", len(in), longest)
			if len(tc.content) > 2000 && longest > 3*6*(max+16)+300 {
				t.Errorf("parser was handed a %d-byte line", longest)
			}
		})
	}
}

// TestElideOnlyUserLines: other lines are never cut (an assistant's tool
// input must stay whole), nor is a user line whose type does not come
// first.
func TestElideOnlyUserLines(t *testing.T) {
	t.Parallel()
	big := jsonString(strings.Repeat("content ", 2000))
	in := `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"content":` + big + `}}]}}` + "\n" +
		`{"message":{"content":[{"tool_use_id":"t1","type":"tool_result","content":` + big + `}]},"type":"user"}` + "\n"
	opts := ParserOptions{MaxEventContent: 100}
	wantEv, _ := parseWhole(in, opts)
	gotEv, _, longest := parseElided(in, opts, 64)
	if !reflect.DeepEqual(gotEv, wantEv) {
		t.Errorf("events differ\ngot  %v\nwant %v", gotEv, wantEv)
	}
	if longest < len(big) {
		t.Errorf("a line was cut to %d bytes", longest)
	}
}

// FuzzElide holds the elided reading of a tool result to the whole one,
// for any valid JSON string content.
func FuzzElide(f *testing.F) {
	f.Add([]byte(`a\nb\u00e9\ud83d\ude00\"`), 5)
	f.Add([]byte(`\ud83d\u0041\udc00\\x`), 1)
	f.Add([]byte("plain text"), 3)
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		max = 1 + (max&0xff)%64
		// Anything at all in a huge user line: no panic, a sound stream.
		evs, _, _ := parseElided(`{"type":"user","message":`+string(body)+"\n"+string(body), ParserOptions{MaxEventContent: max}, 8)
		chattest.Check(t, evs)
		raw := `"` + string(body) + `"`
		if !json.Valid([]byte(raw)) || !utf8.Valid(body) {
			raw = jsonString(string(body))
		}
		content := `"` + strings.Repeat(raw[1:len(raw)-1], 1+200/len(raw)) + `"`
		for _, c := range []string{content, `[{"type":"text","text":` + content + `},{"type":"text","text":` + raw + `}]`} {
			in := fmt.Sprintf("%s\n", toolResultLine(c))
			opts := ParserOptions{MaxEventContent: max}
			wantEv, wantOut := parseWhole(in, opts)
			gotEv, gotOut, _ := parseElided(in, opts, 32)
			if !reflect.DeepEqual(gotEv, wantEv) || !reflect.DeepEqual(gotOut, wantOut) {
				t.Fatalf("content %s\ngot  %v\nwant %v", c, gotEv, wantEv)
			}
		}
	})
}
