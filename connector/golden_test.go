package connector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/internal/sse"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/streams")

// golden is what a recorded stream turns into.
type golden struct {
	Events   []chat.Event `json:"events"`
	Response *Response    `json:"response,omitempty"`
	Error    *goldenError `json:"error,omitempty"`
}

type goldenError struct {
	Class     string `json:"class"`
	Retryable bool   `json:"retryable"`
	Message   string `json:"message"`
}

// TestGoldenStreams replays provider streams (testdata/streams/*.sse, in
// the shape the real APIs send) through the clients and compares events and
// results with NAME.golden.json. Regenerate with
// `go test ./connector -run TestGoldenStreams -update`.
func TestGoldenStreams(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/streams/*.sse")
	if err != nil || len(files) == 0 {
		t.Fatalf("no streams: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".sse")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			typ := TypeOpenAI
			if strings.HasPrefix(name, "anthropic") {
				typ = TypeAnthropic
			}
			f := newFake(t, reply{header: map[string]string{"Content-Type": "text/event-stream"}, body: string(raw)})
			c, _ := newTestClient(t, typ, f, nil)
			var ev chattest.Recorder
			resp, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, ev.Emit)
			compact(t, ev.Events())
			g := golden{Events: stableIDs(ev.Events())}
			var ce *chat.Error
			switch {
			case errors.As(err, &ce):
				g.Error = &goldenError{Class: ce.Code, Retryable: failureOf(ce).Retryable, Message: ce.Message}
			case err != nil:
				t.Fatal(err)
			default:
				resp.Usage.DurationMS = 0
				g.Response = resp
			}
			got, err := json.MarshalIndent(g, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "streams", name+".golden.json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the golden file:\n%s", name, got)
			}
		})
	}
}

// stableIDs replaces random message ids with their order of appearance.
func stableIDs(evs []chat.Event) []chat.Event {
	ids := map[string]string{}
	out := make([]chat.Event, len(evs))
	for i, e := range evs {
		if _, ok := ids[e.ID]; !ok {
			ids[e.ID] = fmt.Sprintf("m%d", len(ids)+1)
		}
		e.ID = ids[e.ID]
		out[i] = e
	}
	return out
}

// BenchmarkStreamParse measures parsing and emitting a 1000-chunk answer
// per provider (no network: the SSE body is in memory).
func BenchmarkStreamParse(b *testing.B) {
	var oa, an strings.Builder
	an.WriteString("event: message_start\ndata: " + strings.SplitN(anStart(), "|", 2)[1] + "\n\n")
	an.WriteString("event: content_block_start\ndata: " + strings.SplitN(anBlock(0, "text"), "|", 2)[1] + "\n\n")
	for range 1000 {
		oa.WriteString("data: " + oaText("token ") + "\n\n")
		an.WriteString("event: content_block_delta\ndata: " + strings.SplitN(anDelta(0, "text_delta", "token "), "|", 2)[1] + "\n\n")
	}
	oa.WriteString("data: " + oaFinish("stop") + "\n\ndata: [DONE]\n\n")
	an.WriteString("event: content_block_stop\ndata: " + strings.SplitN(anStop(0), "|", 2)[1] + "\n\n")
	for _, e := range anEnd("end_turn") {
		an.WriteString("data: " + strings.SplitN(e, "|", 2)[1] + "\n\n")
	}
	for _, bc := range []struct {
		name string
		p    provider
		body string
	}{{"openai", &openAI{}, oa.String()}, {"anthropic", &anthropic{}, an.String()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				out := &output{emit: func(chat.Event) {}, ids: newIDs()}
				if err := bc.p.stream(sse.NewReader(strings.NewReader(bc.body), maxEventBytes), out); err != nil {
					b.Fatal(err)
				}
				if len(out.resp.Content) != 6000 {
					b.Fatalf("content %d bytes", len(out.resp.Content))
				}
			}
		})
	}
}
