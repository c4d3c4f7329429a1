package agentcli_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/executor/agentcli"
	"github.com/agentbox/agentbox/executor/agentcli/clitest"
)

func TestLineReader(t *testing.T) {
	t.Parallel()
	clitest.CheckLineReader(t, func(r io.Reader) func() ([]byte, error) {
		return agentcli.NewLineReader(r).Next
	})
}

// TestLineReaderGrow: a grow hook sees only the parts of lines longer
// than the read buffer and the unterminated last line, and what it
// returns is the line.
func TestLineReaderGrow(t *testing.T) {
	t.Parallel()
	lr := agentcli.NewLineReaderSize(clitest.ChunkReader("short\n"+strings.Repeat("x", 100)+"\nend", 7), 16)
	calls := 0
	grow := func(line, chunk []byte) []byte {
		calls++
		return append(line, bytes.ToUpper(chunk)...)
	}
	var got []string
	for {
		l, err := lr.NextGrow(grow)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(l))
	}
	want := []string{"short", strings.Repeat("X", 100), "END"}
	if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("lines %q", got)
	}
	if calls < 100/16 {
		t.Errorf("Grow called %d times", calls)
	}
}

func TestLineReaderReadError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	lr := agentcli.NewLineReader(io.MultiReader(strings.NewReader("a\npart"), errReader{boom}))
	for _, want := range []string{"a", "part"} {
		if l, err := lr.Next(); err != nil || string(l) != want {
			t.Fatalf("got %q, %v, want %q", l, err, want)
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
	got := []string{agentcli.String(r[0]), agentcli.String(r[1]), agentcli.String(r[2]), agentcli.String(r[3])}
	for i := range buf {
		buf[i] = 'z'
	}
	if want := []string{"plain", `esc"aped`, "12", ""}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", got, want)
	}
}
