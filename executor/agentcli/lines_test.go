package agentcli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

// readAll reads every line of r with opts; each line's bytes are copied.
func readAll(t testing.TB, r io.Reader, opts agentcli.LineOptions) []agentcli.Line {
	t.Helper()
	lr := agentcli.NewLineReaderOptions(r, opts)
	var out []agentcli.Line
	for {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		l.Bytes = bytes.Clone(l.Bytes)
		l.Cuts = append([]agentcli.Cut(nil), l.Cuts...)
		out = append(out, l)
	}
}

func TestLineReader(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 3<<20)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"one unterminated", "abc", []string{"abc"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"blank lines", "\n\na\n", []string{"", "", "a"}},
		{"huge then small", huge + "\nsmall\n" + huge, []string{huge, "small", huge}},
	}
	for _, tc := range tests {
		for _, max := range []int{0, -1} {
			t.Run(fmt.Sprintf("%s/max%d", tc.name, max), func(t *testing.T) {
				t.Parallel()
				got := readAll(t, clitest.ChunkReader(tc.in, 7000), agentcli.LineOptions{Max: max})
				if len(got) != len(tc.want) {
					t.Fatalf("got %d lines, want %d", len(got), len(tc.want))
				}
				for i := range got {
					if string(got[i].Bytes) != tc.want[i] || got[i].Size != int64(len(tc.want[i])) || got[i].Dropped {
						t.Errorf("line %d: got %d bytes (size %d, dropped %v), want %d", i, len(got[i].Bytes), got[i].Size, got[i].Dropped, len(tc.want[i]))
					}
				}
			})
		}
	}
}

// TestLineReaderMax: a line longer than Max is read to its end and
// dropped, with its size; the lines around it are whole.
func TestLineReaderMax(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 1000)
	for _, eol := range []string{"\n", "\r\n"} {
		in := "before" + eol + long + eol + "after" + eol + long
		got := readAll(t, clitest.ChunkReader(in, 33), agentcli.LineOptions{Max: 100, Buffer: 16})
		if len(got) != 4 {
			t.Fatalf("%d lines", len(got))
		}
		for i, want := range []string{"before", "", "after", ""} {
			dropped := want == ""
			if string(got[i].Bytes) != want || got[i].Dropped != dropped {
				t.Errorf("eol %q line %d: %q dropped=%v", eol, i, got[i].Bytes, got[i].Dropped)
			}
			if dropped && got[i].Size != int64(len(long)) {
				t.Errorf("eol %q line %d: size %d", eol, i, got[i].Size)
			}
		}
	}
}

// TestLineReaderFlatMemory: a 1.2 GB line (what an agent process writing
// to the CLI's stdout produced) is read through with the reader's memory
// bounded by Max, not by the line.
func TestLineReaderFlatMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: reads 1.2 GB")
	}
	const size = 1200 << 20
	r := io.MultiReader(strings.NewReader("{\"type\":\"assistant\",\"x\":\""), &repeatReader{b: 'A', n: size}, strings.NewReader("\"}\n{\"type\":\"result\"}\n"))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lr := agentcli.NewLineReaderOptions(r, agentcli.LineOptions{Max: 8 << 20})
	first, err := lr.Next()
	if err != nil || !first.Dropped || first.Size < size {
		t.Fatalf("first line: dropped=%v size=%d err=%v", first.Dropped, first.Size, err)
	}
	second, err := lr.Next()
	if err != nil || string(second.Bytes) != `{"type":"result"}` {
		t.Fatalf("second line %q, %v", second.Bytes, err)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("reading a %d MB line allocated %d MB", size>>20, alloc>>20)
	}
}

// repeatReader reads n bytes b.
type repeatReader struct {
	b byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	for i := range p {
		p[i] = r.b
	}
	r.n -= len(p)
	return len(p), nil
}

func isUserLine(start []byte) bool { return bytes.HasPrefix(start, []byte(`{"type":"user"`)) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// checkElided reads line (a JSON object with one member "c") whole and
// with its strings kept to keep decoded bytes, and checks that the kept
// string is the whole one's prefix and that kept plus dropped is its
// length, as gjson decodes them.
func checkElided(t *testing.T, content string, keep int) {
	t.Helper()
	line := `{"type":"user","c":` + content + `}` + "\n"
	whole := readAll(t, strings.NewReader(line), agentcli.LineOptions{Max: -1})[0]
	cut := readAll(t, clitest.ChunkReader(line, 13), agentcli.LineOptions{Max: -1, Buffer: 16, KeepString: keep, Elide: isUserLine, ElideAfter: 8})[0]
	wv := gjson.GetBytes(whole.Bytes, "c")
	cv := gjson.Get(string(cut.Bytes), "c")
	if !gjson.ValidBytes(cut.Bytes) {
		t.Fatalf("elided line is not valid JSON: %q", cut.Bytes)
	}
	if cut.Size != whole.Size {
		t.Errorf("size %d, whole %d", cut.Size, whole.Size)
	}
	kept, all := cv.String(), wv.String()
	if !strings.HasPrefix(all, kept) {
		t.Fatalf("kept %q is not a prefix of %q", kept, all)
	}
	if len(kept)+cut.DroppedAt(cv.Index) != len(all) {
		t.Errorf("kept %d + dropped %d != %d", len(kept), cut.DroppedAt(cv.Index), len(all))
	}
	if len(kept) > keep+4 {
		t.Errorf("kept %d decoded bytes, keep %d", len(kept), keep)
	}
}

// TestLineReaderElide: strings of an approved line are cut to their first
// decoded bytes, never inside an escape, and the cut says how much was
// dropped.
func TestLineReaderElide(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]string{
		"plain":                  jsonString(strings.Repeat("abcdefghij", 500)),
		"newlines":               jsonString(strings.Repeat("line of output\n", 400)),
		"quotes and backslashes": jsonString(strings.Repeat(`say "hi" \ `, 500)),
		"unicode escapes":        `"` + strings.Repeat(`\u00e9\u4e2d`, 600) + `"`,
		"surrogate pairs":        `"` + strings.Repeat(`\ud83d\ude00x`, 600) + `"`,
		"lone surrogates":        `"` + strings.Repeat(`\ud83d\u0041\ude00yz\ud83dq`, 300) + `"`,
		"utf-8":                  jsonString(strings.Repeat("é中😀", 700)),
		"short":                  jsonString("small"),
	} {
		t.Run(name, func(t *testing.T) { checkElided(t, c, 100) })
	}
	// A line the hook does not approve is kept whole.
	big := jsonString(strings.Repeat("content ", 2000))
	got := readAll(t, clitest.ChunkReader(`{"type":"assistant","c":`+big+"}\n", 100), agentcli.LineOptions{Buffer: 16, KeepString: 10, Elide: isUserLine, ElideAfter: 8})
	if len(got) != 1 || len(got[0].Bytes) < len(big) || len(got[0].Cuts) != 0 {
		t.Errorf("unapproved line cut: %d bytes, %d cuts", len(got[0].Bytes), len(got[0].Cuts))
	}
}

// FuzzElide holds the elided reading of any valid JSON string to the
// whole one.
func FuzzElide(f *testing.F) {
	f.Add([]byte(`a\nb\u00e9\ud83d\ude00\"`), 5)
	f.Add([]byte(`\ud83d\u0041\udc00\\x`), 1)
	f.Add([]byte("plain text"), 3)
	f.Fuzz(func(t *testing.T, body []byte, keep int) {
		keep = 1 + (keep&0xff)%64
		// Anything at all: no panic.
		readAll(t, clitest.ChunkReader(`{"type":"user","c":`+string(body)+"\n"+string(body), 5), agentcli.LineOptions{Buffer: 16, KeepString: keep, Elide: isUserLine, ElideAfter: 8, Max: 4096})
		raw := `"` + string(body) + `"`
		if !json.Valid([]byte(raw)) || !utf8.Valid(body) {
			raw = jsonString(string(body))
		}
		checkElided(t, `"`+strings.Repeat(raw[1:len(raw)-1], 1+200/len(raw))+`"`, keep)
	})
}

func TestLineReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	lr := agentcli.NewLineReader(io.MultiReader(strings.NewReader("a\npart"), errReader{boom}))
	for _, want := range []string{"a", "part"} {
		if l, err := lr.Next(); err != nil || string(l.Bytes) != want {
			t.Fatalf("got %q, %v, want %q", l.Bytes, err, want)
		}
	}
	if _, err := lr.Next(); !errors.Is(err, boom) {
		t.Errorf("err %v, want the read error", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestRing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"short", []string{" a", "b \n"}, "ab"},
		{"overflow in pieces", []string{"0123", "4567", "89"}, "456789"},
		{"one big write", []string{"ab", "0123456789"}, "456789"},
		{"exactly full", []string{"abcdef"}, "abcdef"},
	}
	for _, tc := range tests {
		r := agentcli.NewRing(6)
		for _, w := range tc.writes {
			if n, err := r.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: write %d, %v", tc.name, n, err)
			}
		}
		if got := r.String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTextHelpers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		max  int
		want string
	}{
		{"abc", 5, "abc"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is two bytes: not split
		{"😀", 3, ""},
		{"x😀", 5, "x😀"},
	} {
		if got := agentcli.CapUTF8(tc.s, tc.max); got != tc.want {
			t.Errorf("CapUTF8(%q, %d) = %q, want %q", tc.s, tc.max, got, tc.want)
		}
	}
	if got := agentcli.Redact("key sk-123 and sk-123, tok", []string{"sk-123", "tok"}); got != "key [redacted] and [redacted], [redacted]" {
		t.Errorf("Redact: %q", got)
	}
	long := strings.Repeat("y", 600)
	for in, want := range map[string]string{
		"":                   "",
		"one":                "one",
		"first\nlast\n\n  ":  "last",
		"a\n" + long:         long[100:],
		"  padded line  \n ": "padded line",
	} {
		if got := agentcli.LastLine(in); got != want {
			t.Errorf("LastLine(%q) = %q, want %q", in, got, want)
		}
	}
	for _, tc := range []struct{ in, want string }{{"a\r\n", "a"}, {"a\n", "a"}, {"a\r", "a"}, {"a\n\n", "a\n"}, {"", ""}} {
		if got := string(agentcli.TrimEOL([]byte(tc.in))); got != tc.want {
			t.Errorf("TrimEOL(%q) = %q", tc.in, got)
		}
	}
}

// TestString: a string taken from a line survives the line's buffer
// being reused.
func TestString(t *testing.T) {
	t.Parallel()
	buf := []byte(`{"a":"plain","b":"esc\"aped","n":12}`)
	r := gjson.GetManyBytes(buf, "a", "b", "n", "missing")
	for i := range r {
		r[i] = gjson.Get(string(buf), []string{"a", "b", "n", "missing"}[i])
	}
	got := []string{agentcli.String(r[0]), agentcli.String(r[1]), agentcli.String(r[2]), agentcli.String(r[3])}
	for i := range buf {
		buf[i] = 'z'
	}
	if want := []string{"plain", `esc"aped`, "12", ""}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestCapText(t *testing.T) {
	t.Parallel()
	line := `{"type":"user","c":` + jsonString(strings.Repeat("é", 300)) + `,"n":5}` + "\n"
	l := readAll(t, clitest.ChunkReader(line, 10), agentcli.LineOptions{Buffer: 16, KeepString: 50, Elide: isUserLine, ElideAfter: 8})[0]
	s := string(l.Bytes)
	got := agentcli.CapText(gjson.Get(s, "c"), l, 11)
	if got.Content != strings.Repeat("é", 5) || got.Size != 600 || !got.Truncated {
		t.Errorf("%+v", got)
	}
	if got := agentcli.CapText(gjson.Get(s, "n"), l, 11); got.Content != "5" || got.Size != 1 || got.Truncated {
		t.Errorf("%+v", got)
	}
}
