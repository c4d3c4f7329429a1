package docker_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/agentbox/agentbox/sandbox"
)

// BenchmarkCreateToFirstExec measures "create sandbox" to "first exec
// started" and, in the same run on the same image, `docker run --rm IMAGE
// true`; it reports both and their ratio (target: at most 1.0).
func BenchmarkCreateToFirstExec(b *testing.B) {
	rt, img := newRuntime(b)
	wss, err := sandbox.NewWorkspaces(b.TempDir(), 1000, 1000)
	if err != nil {
		b.Fatal(err)
	}
	ws, release, err := wss.Acquire(context.Background(), "bench", "c")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	ctx := context.Background()
	var ours, theirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		sb, err := rt.Create(ctx, sandbox.Spec{UserID: "bench", ChatID: "c", Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		p, err := sb.Start(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		ours += time.Since(start)
		if err != nil {
			_ = sb.Remove(ctx)
			b.Fatal(err)
		}
		_, _ = p.Wait(ctx)
		b.StopTimer()
		if err := sb.Remove(ctx); err != nil {
			b.Fatal(err)
		}
		start = time.Now()
		if out, err := exec.Command("docker", "run", "--rm", "--network", "none", img, "true").CombinedOutput(); err != nil {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		theirs += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(ours.Milliseconds())/float64(b.N), "ms/create+exec")
	b.ReportMetric(float64(theirs.Milliseconds())/float64(b.N), "ms/docker-run")
	b.ReportMetric(float64(ours)/float64(theirs), "ratio")
}
