package claude

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// checkScan walks raw with the scanner and with gjson side by side: the
// members, elements and their String, Int and Bool must agree.
func checkScan(t *testing.T, raw string) {
	t.Helper()
	g := gjson.Parse(raw)
	if got, want := text(raw), g.String(); got != want {
		t.Fatalf("text(%q) = %q, gjson %q", raw, got, want)
	}
	if got, want := owned(raw), g.String(); got != want {
		t.Fatalf("owned(%q) = %q, gjson %q", raw, got, want)
	}
	if got, want := intVal(raw), g.Int(); got != want {
		t.Fatalf("intVal(%q) = %d, gjson %d", raw, got, want)
	}
	if got, want := boolVal(raw), g.Bool(); got != want {
		t.Fatalf("boolVal(%q) = %v, gjson %v", raw, got, want)
	}
	var keys, vals []string
	switch {
	case g.IsObject():
		it := newObjIter(raw)
		for k, v, ok := it.next(); ok; k, v, ok = it.next() {
			keys = append(keys, k)
			vals = append(vals, v)
		}
	case g.IsArray():
		it := newArrIter(raw)
		for v, ok := it.next(); ok; v, ok = it.next() {
			vals = append(vals, v)
		}
	default:
		return
	}
	i := 0
	g.ForEach(func(k, v gjson.Result) bool {
		if i >= len(vals) {
			t.Fatalf("%q: scanner stopped after %d values", raw, i)
		}
		if g.IsObject() && keys[i] != k.String() {
			t.Fatalf("%q: key %d is %q, gjson %q", raw, i, keys[i], k.String())
		}
		if vals[i] != v.Raw {
			t.Fatalf("%q: value %d is %q, gjson %q", raw, i, vals[i], v.Raw)
		}
		checkScan(t, vals[i])
		i++
		return true
	})
	if i != len(vals) {
		t.Fatalf("%q: scanner found %d values, gjson %d", raw, len(vals), i)
	}
}

func TestScanMatchesGJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{}`, `[]`, `{"a":1,"b":"x","c":[1,2,{"d":null}],"e":true,"f":false,"g":-1.5e3}`,
		`{ "a\"b" : "c\\"  , "\u0041" : [ "\ud83d\ude00", "\u00e9\n\t" ] }`,
		`{"n":12345678901234567890,"s":"123","b":"TRUE","z":"0x10","neg":-7,"f":1.9}`,
		`"a\u0000b"`, `"tab\there"`, `"bad \q escape"`, `"lone \ud83d surrogate"`,
		`"` + strings.Repeat(`0123456789\n`, 100) + `"`,
		`{"type":"stream_event","event":{"delta":{"text":"hi","type":"text_delta"},"index":0},"parent_tool_use_id":null}`,
	} {
		checkScan(t, s)
	}
}

func TestAppendUnescapedCap(t *testing.T) {
	t.Parallel()
	body := strings.Repeat(`ab\n\u00e9\ud83d\ude00\"x\"\\`, 50)
	full := gjson.Parse(`"` + body + `"`).String()
	for limit := 0; limit <= len(full)+2; limit++ {
		got, size := appendUnescaped(nil, body, limit)
		if size != len(full) || string(got) != full[:min(limit, len(full))] {
			t.Fatalf("limit %d: got %q (size %d), want prefix of %q (size %d)", limit, got, size, full, len(full))
		}
	}
}

// FuzzScan holds the scanner to gjson's reading of valid JSON and makes
// sure it never panics on anything else.
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"a":[1,"x\n",{"b":null}],"c":"\u00e9"}`))
	f.Add([]byte(`"\ud83d\ude00\"\\"`))
	f.Add([]byte(`"`))
	f.Add(benchTranscript(1))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		it := newObjIter(s)
		for _, v, ok := it.next(); ok; _, v, ok = it.next() {
			_, _, _ = text(v), intVal(v), boolVal(v)
		}
		ai := newArrIter(s)
		for v, ok := ai.next(); ok; v, ok = ai.next() {
			_ = text(v)
		}
		_, _, _ = resultText(s, 8, cutIndex{})
		if !json.Valid(data) {
			return
		}
		for _, line := range bytes.Split(data, []byte("\n")) {
			if l := string(bytes.TrimSpace(line)); l != "" && json.Valid([]byte(l)) {
				checkScan(t, l)
			}
		}
		if data[0] == '"' {
			body := s[1 : len(s)-1]
			full := gjson.Parse(s).String()
			for _, limit := range []int{0, 1, 5, len(full) / 2, len(full)} {
				got, size := appendUnescaped(nil, body, limit)
				if strings.IndexByte(body, '\\') >= 0 && (size != len(full) || string(got) != full[:min(limit, len(full))]) {
					t.Fatalf("limit %d: got %q (size %d), want prefix of %q", limit, got, size, full)
				}
			}
		}
	})
}

// TestStringEnd puts escapes at every offset around the eight-byte steps
// and checks the end against a byte-by-byte reading.
func TestStringEnd(t *testing.T) {
	t.Parallel()
	ref := func(s string, i int) int {
		for i++; i < len(s); i++ {
			switch s[i] {
			case '"':
				return i + 1
			case '\\':
				i++
			}
		}
		return -1
	}
	for n := 0; n < 48; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, esc := range []string{`\"`, `\\`, `\\\"`, `\n`, `\`} {
				body := strings.Repeat("a", pos) + esc + strings.Repeat("b", n-pos)
				for _, s := range []string{`"` + body + `"`, `"` + body, `"` + body + `"tail"`, `x"` + body + `" `} {
					i := strings.IndexByte(s, '"')
					if got, want := stringEnd(s, i), ref(s, i); got != want {
						t.Fatalf("stringEnd(%q) = %d, want %d", s, got, want)
					}
				}
			}
		}
	}
}
