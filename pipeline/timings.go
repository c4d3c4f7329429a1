package pipeline

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/executor"
)

// tracerName names the pipeline's tracer.
const tracerName = "github.com/agentbox/agentbox/pipeline"

// Phases of a turn, as metrics label them (agentbox_turn_phase_duration_seconds)
// and spans name them.
const (
	phaseChatWait      = "chat_wait"
	phaseSandboxWait   = "sandbox_wait"
	phaseAssemble      = "assemble"
	phaseSandboxCreate = "sandbox_create"
	phaseHookCreate    = "hook_create"
	phaseExecute       = "execute"
	phaseHookNext      = "hook_next"
	phaseSandboxRemove = "sandbox_remove"
)

// phaseOrder is the order phases happen in (and are reported in).
var phaseOrder = []string{phaseChatWait, phaseSandboxWait, phaseAssemble, phaseSandboxCreate,
	phaseHookCreate, phaseExecute, phaseHookNext, phaseSandboxRemove}

// interval is when a phase started and ended.
type interval struct{ start, end time.Time }

func (i interval) dur() time.Duration {
	if i.start.IsZero() || i.end.Before(i.start) {
		return 0
	}
	return i.end.Sub(i.start)
}

// timings records a turn's phases as they happen: a time.Now per phase
// boundary, nothing else on the turn's path. finish turns them into the
// done event's chat.Timings, the log line and, when a tracer records,
// spans.
type timings struct {
	phases map[string]interval
	// sandbox is how the turn got its sandbox (chat.SandboxCold, ...).
	sandbox string
	// exec is what the executor measured; tools its tool calls.
	exec  executor.Timings
	tools []executor.ToolCall
	// firstByte is a direct answer's first event (unix ns); firstText the
	// first text sent to the client.
	firstByte atomic.Int64
	firstText atomic.Int64
}

// phase records the phase name from start to now and observes it in the
// metrics.
func (t *turn) phase(name string, start time.Time) {
	end := time.Now()
	if t.tm.phases == nil {
		t.tm.phases = map[string]interval{}
	}
	t.tm.phases[name] = interval{start, end}
	t.p.metrics.phases.WithLabelValues(name).Observe(end.Sub(start).Seconds())
}

// sawEvent notes the first text the client is sent.
func (t *turn) sawEvent(e chat.Event) {
	if e.Type == chat.TypeText && e.Text != "" && (e.Event == chat.Delta || e.Event == chat.Start) && t.tm.firstText.Load() == 0 {
		t.tm.firstText.CompareAndSwap(0, time.Now().UnixNano())
		t.started()
	}
}

// startingCLI counts the turn among those whose new sandbox's CLI is
// starting (Pipeline.starting) until its first text, or its end.
func (t *turn) startingCLI() {
	t.p.starting.Add(1)
	t.starting.Store(true)
	t.defer_(t.started)
}

// started ends the turn's count among the turns before their first text
// (startingCLI), once.
func (t *turn) started() {
	if t.starting.CompareAndSwap(true, false) {
		t.p.starting.Add(-1)
		t.p.pool.poke()
	}
}

// sawAnswer wraps a direct connector's emit to note its first event.
func (t *turn) sawAnswer(emit chat.EmitFunc) chat.EmitFunc {
	return func(e chat.Event) {
		if t.tm.firstByte.Load() == 0 {
			t.tm.firstByte.CompareAndSwap(0, time.Now().UnixNano())
		}
		emit(e)
	}
}

func unixTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// since is d's length from start in Timings' milliseconds (0 when at is
// zero).
func since(start, at time.Time) float64 {
	if at.IsZero() {
		return 0
	}
	return chat.MS(at.Sub(start))
}

// firstByte is when the model's answer began: the executor's, else the
// direct connector's.
func (tm *timings) firstByteAt() time.Time {
	if !tm.exec.FirstByte.IsZero() {
		return tm.exec.FirstByte
	}
	return unixTime(tm.firstByte.Load())
}

// report is the done event's Timings for a turn that started at start and
// ends at end.
func (tm *timings) report(start, end time.Time) *chat.Timings {
	r := &chat.Timings{Sandbox: tm.sandbox, TotalMS: chat.MS(end.Sub(start))}
	for name, iv := range tm.phases {
		ms := chat.MS(iv.dur())
		switch name {
		case phaseChatWait:
			r.ChatWaitMS = ms
		case phaseSandboxWait:
			r.SandboxWaitMS = ms
		case phaseAssemble:
			r.AssembleMS = ms
		case phaseSandboxCreate:
			r.SandboxCreateMS = ms
		case phaseHookCreate:
			r.HookCreateMS = ms
		case phaseExecute:
			r.ExecuteMS = ms
		case phaseHookNext:
			r.HookNextMS = ms
		case phaseSandboxRemove:
			r.SandboxRemoveMS = ms
		}
	}
	if !tm.exec.Started.IsZero() && !tm.exec.Init.IsZero() {
		r.CLIStartMS = chat.MS(tm.exec.Init.Sub(tm.exec.Started))
	}
	r.FirstByteMS = since(start, tm.firstByteAt())
	r.FirstTextMS = since(start, unixTime(tm.firstText.Load()))
	var tools time.Duration
	for _, c := range tm.tools {
		if !c.Started.IsZero() && !c.Ended.IsZero() {
			tools += c.Ended.Sub(c.Started)
		}
	}
	r.ToolsMS, r.Tools = chat.MS(tools), len(tm.tools)
	return r
}

// logAttrs are the timings for the turn's log line.
func logAttrs(r *chat.Timings) slog.Attr {
	attrs := []any{"total", r.TotalMS}
	add := func(k string, v float64) {
		if v > 0 {
			attrs = append(attrs, k, v)
		}
	}
	add("chat_wait", r.ChatWaitMS)
	add("sandbox_wait", r.SandboxWaitMS)
	add("assemble", r.AssembleMS)
	add("sandbox_create", r.SandboxCreateMS)
	add("hook_create", r.HookCreateMS)
	add("cli_start", r.CLIStartMS)
	add("first_byte", r.FirstByteMS)
	add("first_text", r.FirstTextMS)
	add("tools", r.ToolsMS)
	add("execute", r.ExecuteMS)
	add("hook_next", r.HookNextMS)
	add("sandbox_remove", r.SandboxRemoveMS)
	return slog.Group("ms", attrs...)
}

// tracer is the pipeline's tracer: Config.TracerProvider's, else the
// global one (a no-op unless telemetry set one up).
func (p *Pipeline) tracer() trace.Tracer {
	tp := p.cfg.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// trace turns the turn's timings into spans after the fact: a root span
// for the turn and one per phase, the CLI's start, each tool call and the
// waits for the model's first byte and the first text. With the no-op
// tracer nothing is built.
func (t *turn) trace(ctx context.Context, end time.Time, code string) {
	ctx = context.WithoutCancel(ctx)
	tr := t.p.tracer()
	attrs := []attribute.KeyValue{
		attribute.String("agentbox.user", t.req.UserID),
		attribute.String("agentbox.chat", t.req.ChatID),
		attribute.String("agentbox.assistant", t.req.AssistantID),
	}
	if t.tm.sandbox != "" {
		attrs = append(attrs, attribute.String("agentbox.sandbox", t.tm.sandbox))
	}
	ctx, root := tr.Start(ctx, "agentbox.turn", trace.WithTimestamp(t.start), trace.WithAttributes(attrs...),
		trace.WithSpanKind(trace.SpanKindServer))
	if !root.IsRecording() {
		root.End()
		return
	}
	if code != "" {
		root.SetStatus(codes.Error, code)
		root.SetAttributes(attribute.String("agentbox.error", code))
	}
	span := func(ctx context.Context, name string, from, to time.Time, attrs ...attribute.KeyValue) context.Context {
		if from.IsZero() || to.IsZero() || to.Before(from) {
			return ctx
		}
		sctx, s := tr.Start(ctx, name, trace.WithTimestamp(from), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(to))
		return sctx
	}
	for _, name := range phaseOrder {
		iv, ok := t.tm.phases[name]
		if !ok {
			continue
		}
		if name != phaseExecute {
			span(ctx, name, iv.start, iv.end)
			continue
		}
		ectx, es := tr.Start(ctx, name, trace.WithTimestamp(iv.start))
		span(ectx, "cli_start", t.tm.exec.Started, t.tm.exec.Init)
		for _, c := range t.tm.tools {
			span(ectx, "tool "+c.Name, c.Started, c.Ended,
				attribute.String("agentbox.tool.id", c.ID), attribute.Bool("agentbox.tool.is_error", c.IsError))
		}
		es.End(trace.WithTimestamp(iv.end))
	}
	span(ctx, "first_model_byte", t.start, t.tm.firstByteAt())
	span(ctx, "first_text_delta", t.start, unixTime(t.tm.firstText.Load()))
	root.End(trace.WithTimestamp(end))
}
