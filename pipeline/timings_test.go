package pipeline

import (
	"context"
	"slices"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
	"github.com/agentbox/agentbox/executor"
	"github.com/agentbox/agentbox/scripted"
)

func TestTimingsInDoneEventAndSpans(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	e := newEnvWith(t, &scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}}}, "", func(c *Config) { c.TracerProvider = tp })
	e.ex.run = func(ctx context.Context, req *executor.Request) (*executor.Result, error) {
		time.Sleep(2 * time.Millisecond)
		req.Emit(chat.Event{Event: chat.Start, ID: "t1", Type: chat.TypeText, Text: "ok"})
		req.Emit(chat.Event{Event: chat.End, ID: "t1", Type: chat.TypeText})
		return &executor.Result{Content: "ok", SessionID: "s-1"}, nil
	}
	for _, id := range []string{"coder", "qa"} {
		var rec chattest.Recorder
		if _, err := e.p.Chat(context.Background(), &Request{UserID: "u1", ChatID: "c-" + id, AssistantID: id, Messages: user("hi")}, rec.Emit); err != nil {
			t.Fatal(err)
		}
		tm := rec.Last().Final.Timings
		if tm == nil || tm.TotalMS <= 0 || tm.ExecuteMS <= 0 || tm.FirstTextMS <= 0 || tm.FirstTextMS > tm.TotalMS {
			t.Fatalf("%s: timings = %+v", id, tm)
		}
		if id == "coder" && (tm.Sandbox != chat.SandboxCold || tm.SandboxCreateMS <= 0) {
			t.Errorf("coder: timings = %+v, want a cold sandbox", tm)
		}
		if id == "qa" && (tm.Sandbox != "" || tm.FirstByteMS <= 0) {
			t.Errorf("qa: timings = %+v, want no sandbox and a first byte", tm)
		}
	}
	var names []string
	for _, s := range spans.Ended() {
		names = append(names, s.Name())
	}
	for _, want := range []string{"agentbox.turn", phaseAssemble, phaseSandboxCreate, phaseExecute, phaseSandboxRemove, "first_text_delta", "first_model_byte"} {
		if !slices.Contains(names, want) {
			t.Errorf("spans %v lack %q", names, want)
		}
	}
}
