package assistant

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// copyApp copies the example app into a temporary folder.
func copyApp(t testing.TB, dst string) {
	t.Helper()
	err := filepath.WalkDir(exampleApp, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(exampleApp, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(target, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// edit rewrites a file and moves its modification time forward, so a
// change within the file system's time granularity is still seen.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Duration(atomic.AddInt64(&editSeq, 1)) * time.Second)
	if err := os.Chtimes(path, future, future); err != nil {
		t.Fatal(err)
	}
}

var editSeq int64

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLiveWatch(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	copyApp(t, dir)
	var notified atomic.Int32
	l, err := NewLive(dir, nil, WithNotify(func(*App) { notified.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	first := l.Current()
	if first.Assistants["qa"].Name != "Q&A" || l.LastError() != nil {
		t.Fatalf("initial app: %+v", first.Assistants["qa"])
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l.Watch(ctx, 10*time.Millisecond)
	l.Watch(ctx, 10*time.Millisecond) // a second call is a no-op

	pkg := filepath.Join(dir, "assistants/qa/package.yao")
	edit(t, pkg, `"name": "Q&A"`, `"name": "Questions"`)
	waitFor(t, "the edit to load", func() bool { return l.Current().Assistants["qa"].Name == "Questions" })
	if notified.Load() != 1 {
		t.Errorf("notified %d times", notified.Load())
	}

	// A broken edit keeps the last good app serving and reports why.
	edit(t, pkg, `"connector": "scripted.qa",`, `"connector": "scripted.qa" "oops",`)
	waitFor(t, "the broken edit to be reported", func() bool { return l.LastError() != nil })
	var le *LoadError
	if !errors.As(l.LastError(), &le) || !strings.Contains(le.Problems[0].String(), "assistants/qa/package.yao:") {
		t.Fatalf("LastError = %v", l.LastError())
	}
	if l.Current().Assistants["qa"].Name != "Questions" {
		t.Fatal("the last good app was replaced by a broken one")
	}

	// Fixing it serves the fix and clears the error; a new assistant
	// folder is picked up too.
	edit(t, pkg, `"scripted.qa" "oops",`, `"scripted.qa",`)
	if err := os.MkdirAll(filepath.Join(dir, "assistants/new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assistants/new/package.yao"), []byte(`{"connector": "scripted.qa"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fix to load", func() bool { return l.LastError() == nil && l.Current().Assistants["new"] != nil })

	cancel()
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal("second Close:", err)
	}
}

func TestLiveReloadAndCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyApp(t, dir)
	rejected := errors.New("hooks do not compile")
	var reject atomic.Bool
	l, err := NewLive(dir, nil, WithCheck(func(a *App) error {
		if reject.Load() {
			return rejected
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	first := l.Current()
	if err := l.Reload(); err != nil || l.Current() == first {
		t.Fatalf("reload: %v", err)
	}
	reject.Store(true)
	good := l.Current()
	if err := l.Reload(); !errors.Is(err, rejected) || l.Current() != good || !errors.Is(l.LastError(), rejected) {
		t.Fatalf("a rejected app: %v", err)
	}

	if _, err := NewLive(filepath.Join(appsDir, "bad-syntax"), nil); err == nil {
		t.Fatal("NewLive accepted a broken app")
	}
}

// BenchmarkLoad loads the example app plus 200 generated assistants, each
// with a package.yao (sandbox, MCP reference), prompts, an MCP definition,
// a skill and a hooks file. Target: under 100 ms per load.
func BenchmarkLoad(b *testing.B) {
	dir := genApp(b)
	app, err := Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	if len(app.Assistants) != 202 {
		b.Fatalf("%d assistants", len(app.Assistants))
	}
	// The machine may be shared: CPU time per load (user+system, all
	// threads) is reported beside wall time as the steadier figure.
	start := cpuTime()
	n := 0
	for b.Loop() {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(n), "cpu-ms/op")
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// genApp copies the example app and adds 200 generated assistants.
func genApp(b testing.TB) string {
	dir := b.TempDir()
	copyApp(b, dir)
	for i := range 200 {
		a := filepath.Join(dir, "assistants", fmt.Sprintf("gen%03d", i))
		files := map[string]string{
			"package.yao": `// generated
{
  "name": "Generated ` + fmt.Sprint(i) + `",
  "connector": "scripted.demo",
  "sandbox": {"command": "claude", "max_memory": "1g", "timeout": "5m",
    "arguments": {"max_turns": 10, "allowed_tools": ["Bash", "Read"]}},
  "mcp": {"servers": [{"server_id": "tools.clock", "tools": ["now"]}]},
}`,
			"prompts.yml":                "- role: system\n  content: You are assistant " + fmt.Sprint(i) + ".\n- role: user\n  content: hi\n",
			"mcps/tools/clock.mcp.yao":   `{"command": "node", "args": ["clock.js"], "env": {"TZ": "UTC"}}`,
			"skills/review/SKILL.md":     "---\nname: review\ndescription: Review code.\n---\n# Review\n",
			"skills/review/scripts/r.sh": "#!/bin/sh\n",
			"src/index.js":               "function Create(ctx, m) { return {messages: m}; }\n",
		}
		for name, content := range files {
			p := filepath.Join(a, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	return dir
}

// BenchmarkFingerprint is the cost of one Watch poll over the same app.
func BenchmarkFingerprint(b *testing.B) {
	dir := genApp(b)
	for b.Loop() {
		fingerprint(dir)
	}
}
