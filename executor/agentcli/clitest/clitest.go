// Package clitest holds the test helpers of coding-agent CLI executors
// (see package agentcli): golden transcript tests, and checks that secrets stay
// out of events and workspace files.
package clitest

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor/agentcli"
)

// CheckFuzzed is what a parser fuzz target checks: the parser newParser
// makes reads input without an error or a panic, its events satisfy the
// invariants, and no line of input that is not JSON shows up in a text
// message.
func CheckFuzzed[O any](t testing.TB, input []byte, newParser func(emit chat.EmitFunc) Parser[O]) {
	t.Helper()
	g, err := Collect(bytes.NewReader(input), newParser)
	if err != nil {
		t.Fatal(err)
	}
	events := g.Events
	chattest.Check(t, events)
	for _, line := range bytes.Split(input, []byte("\n")) {
		tl := bytes.TrimSpace(line)
		if len(tl) < 8 || json.Valid(tl) {
			continue
		}
		for _, e := range events {
			if e.Type == chat.TypeText && strings.Contains(e.Text, string(tl)) {
				t.Fatalf("non-JSON line leaked into text: %q", tl)
			}
		}
	}
}

// AddTranscripts adds every recorded transcript (*.jsonl) in dir to f's
// seed corpus, and fails f when there is none.
func AddTranscripts(f *testing.F, dir string) {
	f.Helper()
	seeds, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if len(seeds) == 0 {
		f.Fatalf("no transcripts in %s", dir)
	}
	for _, name := range seeds {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// CheckNoSecret fails t when secret is in any recorded event or in any
// file under dir (a workspace).
func CheckNoSecret(t testing.TB, secret, dir string, logs ...*chattest.Recorder) {
	t.Helper()
	for _, l := range logs {
		b, _ := json.Marshal(l.Events())
		if strings.Contains(string(b), secret) {
			t.Error("API key found in events")
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), secret) {
			t.Errorf("API key found in workspace file %s", p)
		}
		return nil
	})
}

// ChunkReader returns a reader of s that returns at most n bytes a read:
// it makes a line reader accumulate lines from several chunks.
func ChunkReader(s string, n int) io.Reader {
	return &chunkReader{s: s, n: n}
}

type chunkReader struct {
	s string
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	n := min(len(p), c.n, len(c.s))
	copy(p, c.s[:n])
	c.s = c.s[n:]
	return n, nil
}

// DecodeJSONLines decodes every line of data with encoding/json into
// generic values: the baseline a parser's benchmarks compare it to.
func DecodeJSONLines(data []byte) {
	lr := agentcli.NewLineReader(bytes.NewReader(data))
	for {
		l, err := lr.Next()
		if err != nil {
			return
		}
		var v any
		_ = json.Unmarshal(l.Bytes, &v)
	}
}

// BenchmarkDecodeJSON times DecodeJSONLines on data, with data's size as
// the bytes an operation processes.
func BenchmarkDecodeJSON(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		DecodeJSONLines(data)
	}
}

// Transcript is what a parser made of a transcript: its golden file
// content.
type Transcript[O any] struct {
	Events  []chat.Event `json:"events"`
	Outcome O            `json:"outcome"`
}

// Parser is a CLI's stream parser as the helpers drive it: Parse reads a
// whole stream, Close ends it and returns the outcome.
type Parser[O any] interface {
	Parse(r io.Reader) error
	Close() O
}

// Collect parses r with the parser newParser makes for an emit func,
// recording its events, and closes it. The error is Parse's.
func Collect[O any](r io.Reader, newParser func(emit chat.EmitFunc) Parser[O]) (Transcript[O], error) {
	var g Transcript[O]
	p := newParser(func(e chat.Event) { g.Events = append(g.Events, e) })
	err := p.Parse(r)
	g.Outcome = p.Close()
	return g, err
}

// GoldenOptions configure Golden.
type GoldenOptions[O any] struct {
	// Dir holds the transcripts (NAME.jsonl) and their golden files
	// (NAME.golden.json).
	Dir string
	// Package is the package's path for the hint in failures ("./claude").
	Package string
	// Update rewrites the golden files instead of comparing (the test's
	// -update flag).
	Update bool
	// NewParser makes the parser for the transcript called name.
	NewParser func(name string, emit chat.EmitFunc) Parser[O]
	// Check, when set, checks more of each result; the event invariants
	// are always checked.
	Check func(t *testing.T, got Transcript[O])
}

// Golden runs a parallel subtest per transcript in opts.Dir: the events
// and outcome the parser makes of it, as indented JSON, must equal the
// golden file.
func Golden[O any](t *testing.T, opts GoldenOptions[O]) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(opts.Dir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no transcripts in " + opts.Dir)
	}
	sort.Strings(files)
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			g, err := Collect(f, func(emit chat.EmitFunc) Parser[O] { return opts.NewParser(name, emit) })
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			goldenPath := filepath.Join(opts.Dir, name+".golden.json")
			if opts.Update {
				if err := os.WriteFile(goldenPath, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(goldenPath)
			if err != nil {
				t.Fatalf("%v (run go test %s -update)", err, opts.Package)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run go test %s -update and review the diff)\ngot:\n%s", goldenPath, opts.Package, got)
			}
			chattest.Check(t, g.Events)
			if opts.Check != nil {
				opts.Check(t, g)
			}
		})
	}
}
