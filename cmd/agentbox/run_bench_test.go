package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// BenchmarkRunVsDockerRun: a new chat as a user meets it on the command
// line, the whole `agentbox run coder hello` process (start, the app, the
// store, the sandbox, the bridge, the CLI, the answer, the sandbox
// removed, exit), against a bare `docker run --rm` of the same image with
// the same cpu and memory limits running `claude -p hello`, the same
// scripted model answering both; paired runs, interleaved, medians and
// their ratios, to the answer (its text on stdout) and to the exit.
func BenchmarkRunVsDockerRun(b *testing.B) {
	testenv.Docker(b)
	bin := testenv.Agentbox(b)
	image := testenv.Image(b)
	turns := make([]scripted.Turn, 2*b.N+10)
	for i := range turns {
		turns[i] = scripted.Turn{Text: "Done."}
	}
	srv := scripted.NewServer(&scripted.Script{Turns: turns})
	b.Cleanup(srv.Close)
	app := b.TempDir()
	for name, body := range map[string]string{
		"app.jsonc":             `{"data_root": "./data", "sandbox": {"runtime": "docker"}}`,
		"connectors/m.conn.yao": `{"label": "M", "type": "anthropic", "options": {"host": "` + srv.URL + `", "key": "sk-ant-test", "model": "claude-sonnet-4-5"}}`,
		"assistants/coder/package.yao": `{"name": "Coder", "connector": "m", "sandbox": {"command": "claude", "image": "` + image +
			`", "max_memory": "2g", "max_cpu": 2, "arguments": {"permission_mode": "bypassPermissions", "max_turns": 3}}}`,
		"assistants/coder/prompts.yml": "- role: system\n  content: You answer briefly.\n",
	} {
		p := filepath.Join(app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	// timed runs cmd and returns when its stdout first held "Done." and
	// when it exited.
	timed := func(cmd *exec.Cmd) (answer, exit float64) {
		b.Helper()
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if answer == 0 && strings.Contains(sc.Text(), "Done.") {
				answer = float64(time.Since(start).Microseconds()) / 1000
			}
		}
		if err := cmd.Wait(); err != nil || answer == 0 {
			b.Fatalf("%v: %v (answered: %v)\n%s", cmd.Args, err, answer != 0, stderr.String())
		}
		return answer, float64(time.Since(start).Microseconds()) / 1000
	}
	// The first run makes the data root (the store, the loop probe), as an
	// installed app has them.
	timed(exec.CommandContext(ctx, bin, "run", "--app", app, "coder", "hello"))
	var oursAns, oursExit, theirsAns, theirsExit []float64
	b.ResetTimer()
	for range b.N {
		a, e := timed(exec.CommandContext(ctx, bin, "run", "--app", app, "coder", "hello"))
		oursAns, oursExit = append(oursAns, a), append(oursExit, e)
		a, e = timed(exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "host", "--cpus", "2", "--memory", "2g",
			"-e", "ANTHROPIC_BASE_URL="+srv.URL, "-e", "ANTHROPIC_API_KEY=sk-ant-test",
			"-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "-e", "DISABLE_AUTOUPDATER=1",
			image, "claude", "-p", "--model", "claude-sonnet-4-5", "hello"))
		theirsAns, theirsExit = append(theirsAns, a), append(theirsExit, e)
	}
	med := func(d []float64) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(oursAns), "ms/run-answer-median")
	b.ReportMetric(med(theirsAns), "ms/docker-run-answer-median")
	b.ReportMetric(med(oursAns)/med(theirsAns), "ratio-answer")
	b.ReportMetric(med(oursExit), "ms/run-exit-median")
	b.ReportMetric(med(theirsExit), "ms/docker-run-exit-median")
	b.ReportMetric(med(oursExit)/med(theirsExit), "ratio-exit")
}
