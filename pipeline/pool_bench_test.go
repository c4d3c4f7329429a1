package pipeline

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// poolEnvOf is a kept env whose coder runs cli and has a warm pool of
// size, started, and a twin assistant "cold" without one, for new chats
// compared in the same run.
func poolEnvOf(tb testing.TB, ctx context.Context, cli benchCLI, size int, turns []scripted.Turn) *keptEnv {
	return poolEnvWith(tb, ctx, cli, size, turns, nil)
}

// poolEnvWith is poolEnvOf with the pipeline's Config changed by mod, if
// not nil, before it starts.
func poolEnvWith(tb testing.TB, ctx context.Context, cli benchCLI, size int, turns []scripted.Turn, mod func(*Config)) *keptEnv {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("the warm pool attaches workspaces with mounts: needs root")
	}
	e := newKeptEnv(tb, ctx, 0, turns, mod)
	e.useCLI(tb, cli)
	e.coder.Sandbox.Pool = size
	cold := *e.coder
	cold.ID = "cold"
	cold.Sandbox = new(*e.coder.Sandbox)
	cold.Sandbox.Pool = 0
	e.app.Assistants["cold"] = &cold
	e.p.StartPool()
	return e
}

// benchCLI is a coding-agent CLI the benchmarks run, with the type of
// the connector it is driven through.
type benchCLI struct{ command, connector string }

// primingCLIs are the CLIs a pooled sandbox waits with started
// (agentcli.Profile.Primes).
var primingCLIs = map[string]bool{"codex": true, "gemini": true}

// benchCLIs are the CLIs the per-CLI benchmarks run.
var benchCLIs = []benchCLI{{"claude", "anthropic"}, {"codex", "openai"}, {"gemini", "anthropic"}, {"opencode", "anthropic"}}

// useCLI makes e's coder run cli, in its image, behind its connector.
func (e *keptEnv) useCLI(tb testing.TB, cli benchCLI) {
	tb.Helper()
	e.coder.Sandbox.Command = cli.command
	e.coder.Sandbox.Image = testenv.CLIImage(tb, cli.command)
	// opencode's first start took over two minutes on the loaded 2-core
	// machine.
	e.coder.Sandbox.Timeout = 10 * time.Minute
	e.app.Connectors["real"].Type = cli.connector
}

// waitReady waits until the pool holds n ready sandboxes.
func waitReady(tb testing.TB, ctx context.Context, p *Pipeline, n int) {
	tb.Helper()
	for p.Pool().Ready < n {
		select {
		case <-ctx.Done():
			tb.Fatalf("pool never held %d ready sandboxes: %+v", n, p.Pool())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newChat runs a new chat's first turn of assistant and returns its
// answer and timings.
func newChat(tb testing.TB, ctx context.Context, p *Pipeline, assistantID, chatID, msg string) (string, *chat.Timings) {
	tb.Helper()
	got, tm, err := tryChat(ctx, p, assistantID, chatID, msg)
	if err != nil {
		tb.Fatalf("%s: %v", chatID, err)
	}
	return got, tm
}

// tryChat is newChat for a goroutine: it returns the turn's error.
func tryChat(ctx context.Context, p *Pipeline, assistantID, chatID, msg string) (string, *chat.Timings, error) {
	var final *chat.Timings
	resp, err := p.Chat(ctx, &Request{UserID: "alice", ChatID: chatID, AssistantID: assistantID, Messages: user(msg)}, func(ev chat.Event) {
		if ev.Event == chat.Done && ev.Final != nil {
			final = ev.Final.Timings
		}
	})
	if err != nil {
		return "", nil, err
	}
	return resp.Content, final, nil
}

// BenchmarkPoolNewChat: for each CLI, a new chat's first turn (the real
// CLI in Docker behind the bridge, scripted model) on a sandbox claimed
// from a warm pool against one that creates its own, interleaved in one
// run: sandbox_create and request to first text delta, medians and their
// ratio; and the memory of a pooled sandbox waiting (docker stats).
func BenchmarkPoolNewChat(b *testing.B) {
	for _, cli := range benchCLIs {
		b.Run(cli.command, func(b *testing.B) { benchPoolNewChat(b, cli) })
	}
}

func benchPoolNewChat(b *testing.B, cli benchCLI) {
	ctx := context.Background()
	e := poolEnvOf(b, ctx, cli, 2, answers(2*b.N+20))
	// The pool learns how the CLI starts from the assistant's first turn;
	// a CLI that can be primed then waits started in each pooled sandbox.
	newChat(b, ctx, e.p, "coder", "learn", "hello")
	primes := primingCLIs[cli.command]
	want := chat.SandboxPooled
	if primes {
		want = chat.SandboxPrimed
	}
	waitReady(b, ctx, e.p, 2)
	if primes {
		waitPrimed(b, ctx, e.p, "coder")
	}
	mibs := containersMemoryMiB(b, sandbox.LabelInstance+"=pipeline-kept-test", docker.LabelRun+"="+docker.RunID(e.p.cfg.Runtimes["docker"].(*docker.Runtime)), docker.LabelPool)
	var pooledFirst, coldFirst, pooledCreate, coldCreate []float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		waitReady(b, ctx, e.p, 1)
		if primes {
			waitPrimed(b, ctx, e.p, "coder")
		}
		b.StartTimer()
		got, tm := newChat(b, ctx, e.p, "coder", fmt.Sprintf("pooled-%d", i), "hello")
		if got != "Done." || tm.Sandbox != want {
			b.Fatalf("pooled new chat: %q on %s, want %s", got, tm.Sandbox, want)
		}
		pooledFirst, pooledCreate = append(pooledFirst, tm.FirstTextMS), append(pooledCreate, tm.SandboxCreateMS)
		got, tm = newChat(b, ctx, e.p, "cold", fmt.Sprintf("cold-%d", i), "hello")
		if got != "Done." || tm.Sandbox != chat.SandboxCold {
			b.Fatalf("cold new chat: %q on %s", got, tm.Sandbox)
		}
		coldFirst, coldCreate = append(coldFirst, tm.FirstTextMS), append(coldCreate, tm.SandboxCreateMS)
	}
	b.ReportMetric(median(pooledCreate), "ms/pooled-sandbox-create-median")
	b.ReportMetric(median(coldCreate), "ms/cold-sandbox-create-median")
	b.ReportMetric(median(pooledFirst), "ms/pooled-first-text-median")
	b.ReportMetric(median(coldFirst), "ms/cold-first-text-median")
	b.ReportMetric(median(pooledFirst)/median(coldFirst), "ratio-first-text")
	var sum float64
	for _, v := range mibs {
		sum += v
	}
	b.ReportMetric(sum/float64(max(len(mibs), 1)), "MiB/pooled-sandbox")
}

// BenchmarkKeptFollowUpFrozen: a kept chat's follow-up after its sandbox
// was frozen against one that was not, interleaved: request to first
// text delta, medians; and the memory of the chat frozen and running.
func BenchmarkKeptFollowUpFrozen(b *testing.B) {
	for _, cli := range benchCLIs {
		b.Run(cli.command, func(b *testing.B) { benchKeptFollowUpFrozen(b, cli) })
	}
}

func benchKeptFollowUpFrozen(b *testing.B, cli benchCLI) {
	ctx := context.Background()
	e := newKeptEnv(b, ctx, 5*time.Minute, answers(2*b.N+10), nil)
	e.useCLI(b, cli)
	e.p.kept.freezeAfter = 0
	e.turn(b, ctx, "bench", "hello")
	idle := func() *keptChat {
		e.p.kept.mu.Lock()
		defer e.p.kept.mu.Unlock()
		return e.p.kept.byKey[keptKey("alice", "bench")]
	}
	label := sandbox.LabelInstance + "=pipeline-kept-test"
	run := docker.LabelRun + "=" + docker.RunID(e.p.cfg.Runtimes["docker"].(*docker.Runtime))
	running := containersMemoryMiB(b, label, run)
	e.p.kept.freeze(idle())
	frozen := containersMemoryMiB(b, label, run)
	var frozenFirst, warmFirst []float64
	b.ResetTimer()
	for i := range b.N {
		_, tm := e.turn(b, ctx, "bench", fmt.Sprintf("message %d", i))
		if tm.Sandbox != chat.SandboxWarm {
			b.Fatalf("follow-up %d ran on a %s sandbox", i, tm.Sandbox)
		}
		frozenFirst = append(frozenFirst, tm.FirstTextMS)
		_, tm = e.turn(b, ctx, "bench", fmt.Sprintf("message %d again", i))
		warmFirst = append(warmFirst, tm.FirstTextMS)
		b.StopTimer()
		e.p.kept.freeze(idle())
		b.StartTimer()
	}
	b.ReportMetric(median(frozenFirst), "ms/frozen-follow-up-first-text-median")
	b.ReportMetric(median(warmFirst), "ms/follow-up-first-text-median")
	if len(running) == 1 && len(frozen) == 1 {
		b.ReportMetric(running[0], "MiB/kept-chat-running")
		b.ReportMetric(frozen[0], "MiB/kept-chat-frozen")
	}
}
