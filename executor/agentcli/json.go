package agentcli

import (
	"bytes"
	"log/slog"
	"strings"

	"github.com/tidwall/gjson"
)

// This file is what the stream parsers share of reading JSON lines with
// gjson: a line becomes a string of its own once (Object), every value
// read from it aliases that string, and whatever outlives the line is
// copied (String, CapText) so that a small value kept never holds a big
// line in memory.

// LineStats counts the lines of a stream. Lines are what a parser read;
// Skipped those it dropped as not for the client: not JSON objects (stdout
// noise, lines cut short) or objects it could not dispatch on; Dropped
// those the line reader dropped for their length (they count as skipped
// too).
type LineStats struct {
	Lines   int `json:"lines"`
	Skipped int `json:"skipped"`
	Dropped int `json:"dropped,omitempty"`
}

// LogAttrs are the counts as log attributes.
func (c *LineStats) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.Int("lines", c.Lines), slog.Int("skipped", c.Skipped), slog.Int("dropped", c.Dropped)}
}

// Object counts line and returns its text as a string of its own when it
// is a JSON object; anything else but a blank line is counted as skipped
// (a dropped line as dropped too). Only the shape is checked ('{' first,
// '}' last, white space aside): full validation would cost a parser most
// of its time, and gjson reads an invalid object as missing members,
// never out of bounds. The string is the whole line, so the offsets gjson
// reports in it are those of Line.Cuts.
func (c *LineStats) Object(line Line) (string, bool) {
	c.Lines++
	if line.Dropped {
		c.Dropped++
		c.Skipped++
		return "", false
	}
	b := bytes.TrimSpace(line.Bytes)
	if len(b) == 0 {
		return "", false
	}
	if b[0] != '{' || b[len(b)-1] != '}' {
		c.Skipped++
		return "", false
	}
	return string(line.Bytes), true
}

// String returns r's string value (gjson's String) in memory of its own.
func String(r gjson.Result) string {
	if r.Type == gjson.String && strings.IndexByte(r.Raw, '\\') >= 0 {
		return r.Str // unescaped into a fresh buffer already
	}
	return strings.Clone(r.String())
}

// Text is a piece of text capped for an event: a tool result's content.
type Text struct {
	// Content is at most the cap's bytes, cut on a UTF-8 boundary, in
	// memory of its own.
	Content string
	// Size is the whole text's length in bytes, what the line reader
	// dropped of it included.
	Size int
	// Truncated reports Content shorter than the text.
	Truncated bool
}

// CapText reads a string value of line (r.String() for other values)
// capped at max bytes; what the line reader dropped of it (Line.Cuts)
// counts in its Size.
func CapText(r gjson.Result, line Line, max int) Text {
	s := r.String()
	size := len(s)
	if r.Type == gjson.String {
		size += line.DroppedAt(r.Index)
	}
	return CapString(s, size, max)
}

// CapString caps s at max bytes; size is the length of the text s is (a
// prefix of).
func CapString(s string, size, max int) Text {
	if size < len(s) {
		size = len(s)
	}
	if len(s) > max {
		s = CapUTF8(s, max)
	}
	return Text{Content: strings.Clone(s), Size: size, Truncated: size > len(s)}
}
