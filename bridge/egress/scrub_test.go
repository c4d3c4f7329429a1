package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentbox/agentbox/bridge/egress/egresstest"
)

// scrubValue has a byte of each kind the encodings treat apart: letters
// of both cases, digits, '/', '+', '-', '_', '.'.
const scrubValue = "ghp_Ab9/x+Yz-0.Q_w"

// encodings are the ways a host may echo a value that the scrubber
// recognises, each of the whole text a host would send.
func encodings(v string) map[string]string {
	every := func(f func(b byte) string) string {
		var sb strings.Builder
		for i := 0; i < len(v); i++ {
			sb.WriteString(f(v[i]))
		}
		return sb.String()
	}
	j, _ := json.Marshal(v)
	out := map[string]string{
		"raw":                   "token=" + v + ";",
		"upper case":            "TOKEN=" + strings.ToUpper(v),
		"query escape":          "?t=" + url.QueryEscape(v) + "&x=1",
		"path escape":           "/" + url.PathEscape(v) + "/",
		"percent every byte":    every(func(b byte) string { return fmt.Sprintf("%%%02X", b) }),
		"percent lower":         every(func(b byte) string { return fmt.Sprintf("%%%02x", b) }),
		"json":                  `{"auth":` + string(j) + `}`,
		"json unicode":          `"` + every(func(b byte) string { return fmt.Sprintf(`\u%04x`, b) }) + `"`,
		"json escaped slash":    `"` + strings.ReplaceAll(v, "/", `\/`) + `"`,
		"js hex escapes":        every(func(b byte) string { return fmt.Sprintf(`\x%02x`, b) }),
		"html hex entities":     every(func(b byte) string { return fmt.Sprintf("&#x%X;", b) }),
		"html decimal":          every(func(b byte) string { return fmt.Sprintf("&#%d;", b) }),
		"html escape":           "<p>" + html.EscapeString(v) + "</p>",
		"hex":                   "sha=" + hex.EncodeToString([]byte(v)),
		"hex upper":             strings.ToUpper(hex.EncodeToString([]byte(v))),
		"mixed percent and raw": v[:3] + "%" + fmt.Sprintf("%02X", v[3]) + v[4:],
	}
	for _, pre := range []string{"", "u", "us", "user:", "x-access-token:", `{"k":"`} {
		for _, post := range []string{"", "!", "!?", `"}`} {
			raw := []byte(pre + v + post)
			for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding,
				"raw std": base64.RawStdEncoding, "raw url": base64.RawURLEncoding} {
				out[fmt.Sprintf("base64 %s %q+v+%q", name, pre, post)] = "Basic " + enc.EncodeToString(raw) + "\r\n"
			}
		}
	}
	return out
}

func TestScrubberEncodings(t *testing.T) {
	t.Parallel()
	s := NewScrubber(scrubValue)
	for name, text := range encodings(scrubValue) {
		if len(egresstest.Leaks(scrubValue, text)) == 0 {
			t.Errorf("%s: the test's own detector misses the value in %q", name, text)
		}
		got := s.String(text)
		if len(got) != len(text) {
			t.Errorf("%s: length changed: %q -> %q", name, text, got)
		}
		if got == text {
			t.Errorf("%s: not recognised: %q", name, text)
			continue
		}
		if l := egresstest.Leaks(scrubValue, got); len(l) > 0 {
			t.Errorf("%s: still holds the value (%v): %q", name, l, got)
		}
	}
}

// TestScrubberKeepsTheRest: what is around a value stays, and the value
// becomes asterisks in the same encoding (base64 still decodes, with the
// neighbours' bytes intact).
func TestScrubberKeepsTheRest(t *testing.T) {
	t.Parallel()
	s := NewScrubber(scrubValue)
	stars := strings.Repeat("*", len(scrubValue))
	if got := s.String("Bearer " + scrubValue); got != "Bearer "+stars {
		t.Errorf("raw: %q", got)
	}
	if got, _ := url.QueryUnescape(s.String(url.QueryEscape("k=" + scrubValue + "&"))); got != "k="+stars+"&" {
		t.Errorf("query escape decodes to %q", got)
	}
	var decoded string
	if err := json.Unmarshal([]byte(s.String(`"\u0041`+jsonUnicode(scrubValue)+`B"`)), &decoded); err != nil || decoded != "A"+stars+"B" {
		t.Errorf("json unicode decodes to %q, %v", decoded, err)
	}
	if got := html.UnescapeString(s.String("x" + htmlDec(scrubValue) + "y")); got != "x"+stars+"y" {
		t.Errorf("html decimal decodes to %q", got)
	}
	if got, err := hex.DecodeString(s.String(hex.EncodeToString([]byte("<" + scrubValue + ">")))); err != nil || string(got) != "<"+stars+">" {
		t.Errorf("hex decodes to %q, %v", got, err)
	}
	for _, pre := range []string{"", "u", "us", "user:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			in := enc.EncodeToString([]byte(pre + scrubValue + "!?"))
			got, err := enc.DecodeString(s.String(in))
			if err != nil || string(got) != pre+stars+"!?" {
				t.Errorf("base64 of %q+value decodes to %q, %v", pre, got, err)
			}
		}
	}
}

func jsonUnicode(v string) string {
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&sb, `\u%04x`, v[i])
	}
	return sb.String()
}

func htmlDec(v string) string {
	var sb strings.Builder
	for i := 0; i < len(v); i++ {
		fmt.Fprintf(&sb, "&#%d;", v[i])
	}
	return sb.String()
}

// TestScrubReaderAcrossChunks: a value split over reads of any size is
// found, and the stream comes out as a scan of the whole would make it.
func TestScrubReaderAcrossChunks(t *testing.T) {
	t.Parallel()
	s := NewScrubber(scrubValue, "second-secret-value")
	var all strings.Builder
	for _, e := range encodings(scrubValue) {
		all.WriteString(e)
		all.WriteString(" second-secret-value\n")
	}
	text := all.String()
	want := []byte(text)
	s.Scan(want, true)
	for _, size := range []int{1, 2, 3, 5, 7, 64, 4096} {
		var r io.Reader = &chunkReader{data: []byte(text), size: size}
		if size == 1 {
			r = iotest.OneByteReader(r)
		}
		trailers := 0
		got, err := io.ReadAll(s.Reader(io.NopCloser(r), func() { trailers++ }))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("chunks of %d: %v; output differs from a whole scan", size, err)
		}
		if trailers != 1 {
			t.Errorf("chunks of %d: atEOF ran %d times", size, trailers)
		}
		if l := egresstest.Leaks(scrubValue, string(got)); len(l) > 0 {
			t.Errorf("chunks of %d: value left as %v", size, l)
		}
	}
}

// chunkReader returns data size bytes at a time.
type chunkReader struct {
	data []byte
	size int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(c.size, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestScrubReaderHoldsOnlyWhatMayMatch: bytes that cannot begin a value
// are passed on at once (a streamed event is not held back for the next).
func TestScrubReaderHoldsOnlyWhatMayMatch(t *testing.T) {
	t.Parallel()
	s := NewScrubber(scrubValue)
	pr, pw := io.Pipe()
	r := s.Reader(pr, nil)
	go func() { _, _ = pw.Write([]byte("data: {\"n\":1}\n\ndata: ghp_")) }()
	buf := make([]byte, 64)
	n, err := r.Read(buf)
	if err != nil || string(buf[:n]) != "data: {\"n\":1}\n\ndata: " {
		t.Fatalf("first read %q, %v", buf[:n], err)
	}
	go func() { _, _ = pw.Write([]byte(scrubValue[4:] + "\n")); pw.Close() }()
	rest, _ := io.ReadAll(r)
	if string(rest) != strings.Repeat("*", len(scrubValue))+"\n" {
		t.Errorf("rest %q", rest)
	}
}

// TestScrubberLeavesOtherDataAlone: random bytes and text without the
// value pass unchanged.
func TestScrubberLeavesOtherDataAlone(t *testing.T) {
	t.Parallel()
	s := NewScrubber(scrubValue, "0123456789abcdef")
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	orig := bytes.Clone(data)
	s.Scan(data, true)
	if !bytes.Equal(data, orig) {
		t.Error("random data was changed")
	}
	text := strings.Repeat(`{"id":"ghp_Ab9/x+Yz-0.R","hex":"0123456789abcdeX","b64":"Z2hwX0FiOS94K1l6"}`+"\n", 1000)
	if got := s.String(text); got != text {
		t.Error("near misses were changed")
	}
}

func TestScrubberShortValuesIgnored(t *testing.T) {
	t.Parallel()
	if s := NewScrubber("short", ""); !s.Empty() || s.String("short") != "short" {
		t.Error("a value under MinSecretLen must not be scrubbed (it is refused where secrets are configured)")
	}
}

func FuzzScrubReader(f *testing.F) {
	for _, e := range encodings(scrubValue) {
		f.Add([]byte(e), uint8(3))
	}
	f.Add([]byte("&#&#x%%\\u00\\x"+scrubValue[:5]), uint8(1))
	s := NewScrubber(scrubValue)
	f.Fuzz(func(t *testing.T, data []byte, size uint8) {
		want := bytes.Clone(data)
		s.Scan(want, true)
		if len(want) != len(data) {
			t.Fatal("length changed")
		}
		got, err := io.ReadAll(s.Reader(io.NopCloser(&chunkReader{data: bytes.Clone(data), size: int(size%16) + 1}), nil))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("streamed %q, whole %q", got, want)
		}
		if bytes.Contains(bytes.ToLower(got), bytes.ToLower([]byte(scrubValue))) {
			t.Fatalf("value left in %q", got)
		}
	})
}

func BenchmarkScrubReader(b *testing.B) {
	s := NewScrubber(scrubValue, "second-secret-value-7a1f")
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		sb.WriteString(`{"login":"octo","id":123456,"url":"https://api.github.com/users/octo","token_hint":"ghp_...","sha":"0a1b2c3d4e5f"}` + "\n")
	}
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		_, _ = io.Copy(io.Discard, s.Reader(io.NopCloser(bytes.NewReader(data)), nil))
	}
}
