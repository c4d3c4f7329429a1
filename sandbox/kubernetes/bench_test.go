package kubernetes_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/kubernetes"
	"github.com/agentbox/agentbox/sandbox/kubernetes/k8stest"
)

// TestRequestsPerSandbox counts what one sandbox costs the API server: one
// create, one request per exec, one exec to kill its processes and one
// delete; waiting for the pod to run costs nothing per sandbox (the
// runtime's informer lists and watches once).
func TestRequestsPerSandbox(t *testing.T) {
	t.Parallel()
	var reqs k8stest.Requests
	rt := k8stest.Runtime(t, kubernetes.Options{Instance: "requests", RESTConfig: reqs.Wrap(k8stest.ServiceAccount(t))})
	ctx := context.Background()
	sb, err := newSandbox(t, rt, nil) // the first one starts the informer
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	reqs.Reset()
	sb, err = newSandbox(t, rt, nil)
	if err != nil {
		t.Fatal(err)
	}
	const execs = 3
	for range execs {
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sb.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	counts, total := reqs.Counts()
	// A pod that takes over 2 s to start has its events read (mount
	// failures show only there): a busy machine's doing, not the runtime's.
	delete(counts, "GET events")
	want := map[string]int{"POST pods": 1, "GET pods/exec": execs + 1, "DELETE pods": 1}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("requests for one sandbox with %d execs: %v (%d), want %v", execs, counts, total, want)
	}
}

// BenchmarkCreateRemove measures a sandbox from Create to running, and its
// Remove (the processes killed and the pod deleted), reported apart.
func BenchmarkCreateRemove(b *testing.B) {
	rt := k8stest.Runtime(b, kubernetes.Options{Instance: "bench"})
	wss := workspaces(b)
	ws, release, err := wss.Acquire(context.Background(), "bench", "c")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	ctx := context.Background()
	var create, remove time.Duration
	for b.Loop() {
		start := time.Now()
		sb, err := rt.Create(ctx, sandbox.Spec{UserID: "bench", ChatID: "c", Workspace: ws})
		if err != nil {
			b.Fatal(err)
		}
		create += time.Since(start)
		start = time.Now()
		if err := sb.Remove(ctx); err != nil {
			b.Fatal(err)
		}
		remove += time.Since(start)
	}
	b.ReportMetric(float64(create.Milliseconds())/float64(b.N), "ms/create")
	b.ReportMetric(float64(remove.Milliseconds())/float64(b.N), "ms/remove")
}

// BenchmarkExec measures one Exec of `true` in a running sandbox: the
// request through the API server and the kubelet, the wrapper reading its
// preamble, the exit code.
func BenchmarkExec(b *testing.B) {
	rt := k8stest.Runtime(b, kubernetes.Options{Instance: "bench"})
	sb, err := newSandbox(b, rt, func(s *sandbox.Spec) {
		s.Env = map[string]string{"A": "1", "B": "2", "PATH": "/usr/local/bin:/usr/bin:/bin"}
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec = %+v, %v", res, err)
		}
	}
}

// BenchmarkExecTimeout measures an Exec killed by its timeout: from the
// timeout to Exec's return (the kill exec, the output's end).
func BenchmarkExecTimeout(b *testing.B) {
	rt := k8stest.Runtime(b, kubernetes.Options{Instance: "bench"})
	sb, err := newSandbox(b, rt, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	const timeout = 200 * time.Millisecond
	var kill time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"sleep", "30"}, Timeout: timeout}); err == nil {
			b.Fatal("no timeout")
		}
		kill += time.Since(start) - timeout
	}
	b.ReportMetric(float64(kill.Milliseconds())/float64(b.N), "ms/kill")
}

// BenchmarkPoolClaim measures a new chat's sandbox to its first command's
// exit, claimed from the warm pool (the workspace attached, the pod taken
// by label, the check's exec) and created cold, interleaved in one run;
// it reports both and their ratio. Making the pooled pod is not timed:
// the pool does it ahead of demand.
func BenchmarkPoolClaim(b *testing.B) {
	testenv.Root(b, "to attach a workspace to a running pod")
	rt := k8stest.Runtime(b, kubernetes.Options{Instance: "bench-pool", PoolDir: filepath.Join(k8stest.SharedTempDir(b), "pool")})
	ws, release, err := workspaces(b).Acquire(context.Background(), "bench", "c")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(release)
	ctx := context.Background()
	spec := sandbox.Spec{UserID: "bench", ChatID: "c", Workspace: ws}
	firstExec := func(sb sandbox.Sandbox) {
		if res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}}); err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %v %+v", err, res)
		}
	}
	var claim, cold time.Duration
	for b.Loop() {
		b.StopTimer()
		pooled, err := rt.Prestart(ctx, sandbox.Spec{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		sb, err := pooled.Claim(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		firstExec(sb)
		claim += time.Since(start)
		start = time.Now()
		sb2, err := rt.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		firstExec(sb2)
		cold += time.Since(start)
		b.StopTimer()
		_ = sb.Remove(ctx)
		_ = sb2.Remove(ctx)
		b.StartTimer()
	}
	b.ReportMetric(float64(claim.Milliseconds())/float64(b.N), "ms/claim")
	b.ReportMetric(float64(cold.Milliseconds())/float64(b.N), "ms/create")
	b.ReportMetric(float64(claim)/float64(cold), "claim/create")
}
