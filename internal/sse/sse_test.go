package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r io.Reader, max int) ([]Event, error) {
	t.Helper()
	rd := NewReader(r, max)
	var out []Event
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"basic", "data: a\n\ndata: b\n\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"crlf and names", "event: x\r\ndata: 1\r\n\r\n", []Event{{Type: "x", Data: []byte("1")}}},
		{"multi-line data", "data: a\ndata: b\n\n", []Event{{Data: []byte("a\nb")}}},
		{"no space after colon", "data:a\n\n", []Event{{Data: []byte("a")}}},
		{"only one space stripped", "data:  a\n\n", []Event{{Data: []byte(" a")}}},
		{"comments and retry skipped", ": keep-alive\nid: 4\nretry: 10\ndata: x\n\n", []Event{{ID: "4", Data: []byte("x")}}},
		{"id with NUL ignored", "id: a\x00b\ndata: x\n\n", []Event{{Data: []byte("x")}}},
		{"fields reset after each event", "event: e\nid: 1\ndata: x\n\ndata: y\n\n", []Event{{Type: "e", ID: "1", Data: []byte("x")}, {Data: []byte("y")}}},
		{"event without data is skipped", "event: ping\n\ndata: y\n\n", []Event{{Data: []byte("y")}}},
		{"last event without blank line", "data: [DONE]", []Event{{Data: []byte("[DONE]")}}},
		{"empty data field", "data\n\n", []Event{{Data: []byte("")}}},
		{"unknown field ignored", "foo: bar\ndata: z\n\n", []Event{{Data: []byte("z")}}},
		{"long line", "data: " + strings.Repeat("x", 100000) + "\n\n", []Event{{Data: []byte(strings.Repeat("x", 100000))}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// One byte at a time exercises every buffer boundary.
			got, err := readAll(t, iotest.OneByteReader(strings.NewReader(tt.in)), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReaderLimit(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"one long line":      "data: " + strings.Repeat("x", 1000) + "\n\n",
		"many data lines":    strings.Repeat("data: "+strings.Repeat("x", 90)+"\n", 20) + "\n",
		"no line end at all": strings.Repeat("x", 2000),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			events, err := readAll(t, strings.NewReader("data: before\n\n"+in), 512)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			if len(events) != 1 || string(events[0].Data) != "before" {
				t.Fatalf("events before the error = %q, want the first", events)
			}
		})
	}
}

func TestReaderError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: cut"), iotest.ErrReader(boom))
	events, err := readAll(t, r, 1<<20)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the read error", err)
	}
	// The event the error cut short is dropped: it may be incomplete.
	if want := []Event{{Data: []byte("a")}}; !reflect.DeepEqual(events, want) {
		t.Fatalf("events = %q, want %q", events, want)
	}
}

func TestDecoderSkip(t *testing.T) {
	t.Parallel()
	in := "data: " + strings.Repeat("x", 100) + "\n\n" +
		"data: " + strings.Repeat("y", 30) + "\ndata: " + strings.Repeat("y", 30) + "\n\n" +
		"data: ok\n\n"
	var got []string
	d := NewDecoder(50, true, func(e Event) { got = append(got, string(e.Data)) })
	for i := range len(in) {
		if _, err := d.Write([]byte{in[i]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, []string{"ok"}) {
		t.Fatalf("events = %q, want only the one within bounds", got)
	}
}

func TestFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   Event
		want string
	}{
		{Event{Data: []byte(`{"a":1}`)}, "data: {\"a\":1}\n\n"},
		{Event{Type: "message_start", Data: []byte("{}")}, "event: message_start\ndata: {}\n\n"},
		{Event{ID: "r1.4", Type: "delta", Data: []byte("x")}, "id: r1.4\nevent: delta\ndata: x\n\n"},
		{Event{Data: []byte("a\nb\r\nc\rd")}, "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{Event{}, "data: \n\n"},
		{Event{Type: "a\nb", ID: "1\r\n2\x00"}, "id: 1 2 \nevent: a b\ndata: \n\n"},
	}
	for _, tt := range tests {
		if got := string(Frame(tt.in)); got != tt.want {
			t.Errorf("Frame(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestComment(t *testing.T) {
	t.Parallel()
	if got := string(Comment("ping")); got != ": ping\n\n" {
		t.Errorf("Comment = %q", got)
	}
	events, err := readAll(t, strings.NewReader(string(Comment("a\nevent: x\ndata: y"))+"data: z\n\n"), 1<<10)
	if err != nil || len(events) != 1 || string(events[0].Data) != "z" {
		t.Errorf("a comment with line breaks read as %q (%v), want only the event after it", events, err)
	}
}

// FuzzReader checks that the reader never panics or loops, that it does
// not depend on how the stream is split into reads, and that a frame it
// writes reads back as the event it was (with its data's line ends as
// "\n").
func FuzzReader(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "event: x\r\ndata: 1\r\n\r\n", ":c\n\ndata:\n", "data: a\ndata: b", "\r\n\n\r", "id: 1\ndata: x\n\n"} {
		f.Add([]byte(s), 3)
	}
	f.Fuzz(func(t *testing.T, in []byte, size int) {
		whole, werr := readAll(t, bytes.NewReader(in), 256)
		split, serr := readAll(t, iotest.HalfReader(bytes.NewReader(in)), 256)
		if !reflect.DeepEqual(whole, split) || (werr == nil) != (serr == nil) {
			t.Fatalf("events depend on read sizes: %q (%v) and %q (%v)", whole, werr, split, serr)
		}
		for _, e := range whole {
			if len(e.Data) > len(in) {
				t.Fatalf("event data longer than the input")
			}
		}
		e := Event{Type: string(in[:min(len(in), size&15)]), Data: in}
		back, err := readAll(t, bytes.NewReader(Frame(e)), 1<<20)
		if err != nil || len(back) != 1 {
			t.Fatalf("frame of %q read back as %q (%v)", e, back, err)
		}
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(in))
		if string(back[0].Data) != want {
			t.Fatalf("data %q read back as %q", want, back[0].Data)
		}
	})
}
