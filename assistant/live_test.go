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
		if rel == "data" && d.IsDir() {
			return fs.SkipDir // make demo's chats: disk images of 10 GiB
		}
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

	// A broken edit of an assistant keeps its last good version serving
	// and says why; the other assistants take their edits.
	edit(t, pkg, `"connector": "scripted.qa",`, `"connector": "scripted.qa" "oops",`)
	waitFor(t, "the broken edit to be reported", func() bool { return l.Current().Failed["qa"] != nil })
	f := l.Current().Failed["qa"]
	if !strings.Contains(f.Problems[0].String(), "assistants/qa/package.yao:") || !f.Serving() || l.LastError() != nil {
		t.Fatalf("failed = %+v, LastError = %v", f, l.LastError())
	}
	if l.Current().Assistants["qa"].Name != "Questions" || l.Current().Assistants["coder"] == nil {
		t.Fatal("the last good version of qa was replaced by a broken one, or the others stopped")
	}

	// A broken edit of the app's settings keeps the whole last good app.
	appFile := filepath.Join(dir, AppFile)
	good := l.Current()
	orig, err := os.ReadFile(appFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(appFile, []byte(`{"listen": 8080}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the broken app.jsonc to be reported", func() bool { return l.LastError() != nil })
	var le *LoadError
	if !errors.As(l.LastError(), &le) || !strings.Contains(le.Problems[0].String(), "app.jsonc:") || l.Current() != good {
		t.Fatalf("LastError = %v", l.LastError())
	}
	if err := os.WriteFile(appFile, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "app.jsonc to load again", func() bool { return l.LastError() == nil })

	// Fixing it serves the fix and clears the error; a new assistant
	// folder is picked up too.
	edit(t, pkg, `"scripted.qa" "oops",`, `"scripted.qa",`)
	if err := os.MkdirAll(filepath.Join(dir, "assistants/new"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assistants/new/package.yao"), []byte(`{"connector": "scripted.qa"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fix to load", func() bool {
		return l.LastError() == nil && l.Current().Assistants["new"] != nil && l.Current().Failed["qa"] == nil
	})

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
	var reject atomic.Bool
	l, err := NewLive(dir, nil, WithCheck(func(_ *App, a *Assistant) []Problem {
		if reject.Load() && a.ID == "coder" {
			return []Problem{{File: "assistants/coder/src/index.ts", Line: 3, Col: 1, Msg: "does not compile"},
				{File: "assistants/coder/src/index.ts", Line: 4, Col: 1, Msg: "Process is Yao-only", Severity: SeverityWarning}}
		}
		return []Problem{{File: "assistants/" + a.ID + "/src/index.ts", Msg: "a warning", Severity: SeverityWarning}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	first := l.Current()
	if len(first.Failed) != 0 || len(first.Warnings) == 0 {
		t.Fatalf("warnings failed assistants: %v", first.Failed)
	}
	if err := l.Reload(); err != nil || l.Current() == first {
		t.Fatalf("reload: %v", err)
	}
	// A check's error fails that assistant only; its last good version
	// serves, and its warnings stay warnings.
	reject.Store(true)
	good := l.Current()
	if err := l.Reload(); err != nil || l.LastError() != nil {
		t.Fatalf("a rejected assistant failed the reload: %v", err)
	}
	app := l.Current()
	f := app.Failed["coder"]
	if f == nil || len(f.Problems) != 1 || f.LastGood != good.Assistants["coder"] || app.Assistants["coder"] != good.Assistants["coder"] || app.Assistants["qa"] == nil {
		t.Fatalf("failed = %+v", f)
	}
	if want := `assistant "coder" cannot run: its definition has errors: assistants/coder/src/index.ts:3:1: does not compile`; f.Error() != want {
		t.Fatalf("Error() = %q, want %q", f.Error(), want)
	}
	// A fresh start has no last good version: the assistant does not run.
	l2, err := NewLive(dir, nil, WithCheck(func(_ *App, a *Assistant) []Problem {
		return []Problem{{File: "assistants/" + a.ID, Msg: "broken"}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l2.Close(context.Background()) })
	if cur := l2.Current(); len(cur.Assistants) != 0 || cur.Failed["qa"] == nil || cur.Failed["qa"].Serving() {
		t.Fatalf("assistants %v, failed %v", cur.Assistants, cur.Failed)
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

// TestFingerprintScripts: the scripts hooks call and the imports they
// resolve are part of what Watch sees change.
func TestFingerprintScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	copyApp(t, dir)
	before := fingerprint(dir)
	for _, f := range []string{"scripts/orders.ts", "services/shop.js", "tsconfig.json"} {
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("// "+f), 0o644); err != nil {
			t.Fatal(err)
		}
		after := fingerprint(dir)
		if after == before {
			t.Errorf("adding %s left the fingerprint as it was", f)
		}
		before = after
	}
}
