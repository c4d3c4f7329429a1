package pipeline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
)

// BenchmarkGVisorTurns: the real Claude Code CLI behind the bridge, on
// runc and on gVisor's runsc in one run, interleaved: a new chat's turn
// (request to done: the sandbox, the bridge and the CLI started for it)
// and its follow-up on the kept chat (request to first text), medians and
// the ratios gvisor/runc; and the memory a kept chat holds (its container,
// the CLI and, for gVisor, the Sentry and gofer, as docker stats measures
// it).
func BenchmarkGVisorTurns(b *testing.B) {
	testenv.GVisor(b)
	ctx := context.Background()
	const reps = 5
	n := max(b.N, 1) * reps
	envs := map[string]*keptEnv{}
	for _, iso := range []string{sandbox.IsolationRunc, sandbox.IsolationGVisor} {
		e := newKeptEnv(b, ctx, 5*time.Minute, answers(2*n+10), nil)
		e.coder.Sandbox.Isolation = iso
		// A first chat makes gVisor's readable copy of the CLI; not counted.
		e.turn(b, ctx, "warm-up", "hello")
		envs[iso] = e
	}
	newChat, followUp := map[string][]float64{}, map[string][]float64{}
	b.ResetTimer()
	for i := range n {
		for iso, e := range envs {
			chatID := fmt.Sprintf("bench-%d", i)
			start := time.Now()
			if got, _ := e.turn(b, ctx, chatID, "hello"); got != "Done." {
				b.Fatalf("%s: answer %q", iso, got)
			}
			newChat[iso] = append(newChat[iso], chat.MS(time.Since(start)))
			_, tm := e.turn(b, ctx, chatID, "again")
			if tm.Sandbox != chat.SandboxWarm {
				b.Fatalf("%s: the follow-up ran on a %s sandbox", iso, tm.Sandbox)
			}
			followUp[iso] = append(followUp[iso], tm.FirstTextMS)
		}
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		v    map[string][]float64
	}{{"new-chat-done", newChat}, {"follow-up-first-text", followUp}} {
		runc, gvisor := median(m.v[sandbox.IsolationRunc]), median(m.v[sandbox.IsolationGVisor])
		b.ReportMetric(runc, "ms/runc-"+m.name)
		b.ReportMetric(gvisor, "ms/gvisor-"+m.name)
		b.ReportMetric(gvisor/runc, "ratio-"+m.name)
	}
	runc, gvisor := isolationMemoryMiB(b, sandbox.IsolationRunc), isolationMemoryMiB(b, sandbox.IsolationGVisor)
	b.ReportMetric(runc, "MiB/runc-kept-chat")
	b.ReportMetric(gvisor, "MiB/gvisor-kept-chat")
	b.ReportMetric(gvisor/runc, "ratio-kept-chat-memory")
}

// isolationMemoryMiB is the median memory use of this test's kept chats'
// containers of one isolation.
func isolationMemoryMiB(b *testing.B, isolation string) float64 {
	return median(containersMemoryMiB(b, sandbox.LabelInstance+"=pipeline-kept-test", sandbox.LabelIsolation+"="+isolation))
}
