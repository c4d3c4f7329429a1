package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/scripted"
)

// The cold path as a user meets it: a new chat, no warm pool, against a
// bare `docker run --rm` of the same image with the same cpu and memory
// limits running `claude -p hello`, the same scripted model answering
// both; paired runs, interleaved, medians and their ratios, to the answer
// (its text) and to the return (the process's exit, the response's end).

// coldBench is a scripted model and an app whose assistant coder runs
// Claude Code in Docker, answering "Done." to every turn.
type coldBench struct {
	b     *testing.B
	bin   string
	image string
	srv   *scripted.Server
	app   string
}

func newColdBench(b *testing.B) *coldBench {
	testenv.Docker(b)
	c := &coldBench{b: b, bin: testenv.Agentbox(b), image: testenv.Image(b)}
	turns := make([]scripted.Turn, 2*b.N+10)
	for i := range turns {
		turns[i] = scripted.Turn{Text: "Done."}
	}
	c.srv = scripted.NewServer(&scripted.Script{Turns: turns})
	b.Cleanup(c.srv.Close)
	c.app = b.TempDir()
	for name, body := range map[string]string{
		"app.jsonc":             `{"data_root": "./data", "sandbox": {"runtime": "docker"}}`,
		"connectors/m.conn.yao": `{"label": "M", "type": "anthropic", "options": {"host": "` + c.srv.URL + `", "key": "sk-ant-test", "model": "claude-sonnet-4-5"}}`,
		"assistants/coder/package.yao": `{"name": "Coder", "connector": "m", "sandbox": {"command": "claude", "image": "` + c.image +
			`", "max_memory": "2g", "max_cpu": 2, "arguments": {"permission_mode": "bypassPermissions", "max_turns": 3}}}`,
		"assistants/coder/prompts.yml": "- role: system\n  content: You answer briefly.\n",
	} {
		p := filepath.Join(c.app, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

// dockerRun times the bare docker run: when its stdout held "Done." and
// when it exited.
func (c *coldBench) dockerRun(ctx context.Context) (answer, exit float64) {
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "host", "--cpus", "2", "--memory", "2g",
		"-e", "ANTHROPIC_BASE_URL="+c.srv.URL, "-e", "ANTHROPIC_API_KEY=sk-ant-test",
		"-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "-e", "DISABLE_AUTOUPDATER=1",
		c.image, "claude", "-p", "--model", "claude-sonnet-4-5", "hello")
	answer, exit, _ = c.timed(cmd)
	return answer, exit
}

// timed runs cmd and returns when its stdout first held "Done." and when
// it exited, with the timings of the done event it printed (agentbox run
// --json), if any.
func (c *coldBench) timed(cmd *exec.Cmd) (answer, exit float64, tm *chat.Timings) {
	c.b.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.b.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		c.b.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if answer == 0 && strings.Contains(line, "Done.") {
			answer = msSince(start)
		}
		if tm == nil {
			tm = doneTimings(line)
		}
	}
	if err := cmd.Wait(); err != nil || answer == 0 {
		c.b.Fatalf("%v: %v (answered: %v)\n%s", cmd.Args, err, answer != 0, stderr.String())
	}
	return answer, msSince(start), tm
}

// doneTimings are the timings of line when it is a done event (JSON, as
// agentbox run --json prints it, or an SSE data line).
func doneTimings(line string) *chat.Timings {
	line = strings.TrimPrefix(line, "data: ")
	if !strings.Contains(line, `"done"`) {
		return nil
	}
	var e struct {
		Done    *chat.Final   `json:"done"`
		Timings *chat.Timings `json:"timings"`
	}
	if json.Unmarshal([]byte(line), &e) != nil {
		return nil
	}
	if e.Done != nil {
		return e.Done.Timings
	}
	return e.Timings
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// phases collects the turn's phases over the runs (sandbox create, CLI
// start, first text: where the time goes), reported as medians.
type phases struct{ create, cliStart, firstText, total []float64 }

func (p *phases) add(tm *chat.Timings) {
	if tm == nil {
		return
	}
	p.create = append(p.create, tm.SandboxCreateMS)
	p.cliStart = append(p.cliStart, tm.CLIStartMS)
	p.firstText = append(p.firstText, tm.FirstTextMS)
	p.total = append(p.total, tm.TotalMS)
}

func (p *phases) report(b *testing.B) {
	if len(p.total) == 0 {
		return
	}
	b.ReportMetric(median(p.create), "ms/sandbox-create-median")
	b.ReportMetric(median(p.cliStart), "ms/cli-start-median")
	b.ReportMetric(median(p.firstText), "ms/turn-first-text-median")
	b.ReportMetric(median(p.total), "ms/turn-total-median")
}

func median(d []float64) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkRunVsDockerRun: the whole `agentbox run --json coder hello`
// process (start, the app, the store, the sandbox, the bridge, the CLI,
// the answer, the sandbox removed, exit) against the bare docker run;
// the turn's phases (from its done event) say where the time goes.
func BenchmarkRunVsDockerRun(b *testing.B) {
	c := newColdBench(b)
	ctx := context.Background()
	run := func() *exec.Cmd {
		return exec.CommandContext(ctx, c.bin, "run", "--app", c.app, "--json", "coder", "hello")
	}
	// The first run makes the data root (the store, the loop probe), as an
	// installed app has them.
	c.timed(run())
	c.pairs(ctx, "run", func() (float64, float64, *chat.Timings) { return c.timed(run()) })
}

// BenchmarkServeVsDockerRun: a new chat's request to a running `agentbox
// serve` (POST /api/assistants/coder/chat, a new chat id each time), to
// its answer's text and to the response's end, against the bare docker
// run.
func BenchmarkServeVsDockerRun(b *testing.B) {
	c := newColdBench(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := freeAddr(b)
	base := "http://" + addr
	serve := exec.CommandContext(ctx, c.bin, "serve", "--app", c.app, "--addr", addr)
	var stderr testenv.SyncBuffer
	serve.Stdout, serve.Stderr = io.Discard, &stderr
	serve.Cancel = func() error { return serve.Process.Signal(os.Interrupt) }
	serve.WaitDelay = time.Minute
	if err := serve.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() { _ = serve.Wait(); exited <- serve.ProcessState.ExitCode() }()
	b.Cleanup(func() {
		cancel()
		<-exited
	})
	waitUp(b, base, exited, &stderr)
	n := 0
	request := func() (answer, end float64, tm *chat.Timings) {
		b.Helper()
		n++
		body := fmt.Sprintf(`{"chat_id":"bench-%d","message":"hello"}`, n)
		start := time.Now()
		resp, err := http.Post(base+"/api/assistants/coder/chat", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			b.Fatalf("chat: %s: %s\n%s", resp.Status, msg, stderr.String())
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if answer == 0 && strings.HasPrefix(line, "data: ") && strings.Contains(line, "Done.") {
				answer = msSince(start)
			}
			if tm == nil {
				tm = doneTimings(line)
			}
		}
		if err := sc.Err(); err != nil || answer == 0 || tm == nil {
			b.Fatalf("chat: %v (answered: %v, done: %v)\n%s", err, answer != 0, tm != nil, stderr.String())
		}
		return answer, msSince(start), tm
	}
	// The first chat makes the data root, as on a server that has served.
	request()
	c.pairs(ctx, "serve", request)
}

// pairs runs b.N pairs, ours (named what: its answer, its return and the
// turn's timings) then the bare docker run, and reports the medians of
// both, to the answer and to the return, their ratios and the turn's
// phases.
func (c *coldBench) pairs(ctx context.Context, what string, ours func() (answer, end float64, tm *chat.Timings)) {
	b := c.b
	var oursAns, oursEnd, theirsAns, theirsExit []float64
	var ph phases
	b.ResetTimer()
	for range b.N {
		a, e, tm := ours()
		oursAns, oursEnd = append(oursAns, a), append(oursEnd, e)
		ph.add(tm)
		a, e = c.dockerRun(ctx)
		theirsAns, theirsExit = append(theirsAns, a), append(theirsExit, e)
	}
	b.StopTimer()
	b.ReportMetric(median(oursAns), "ms/"+what+"-answer-median")
	b.ReportMetric(median(theirsAns), "ms/docker-run-answer-median")
	b.ReportMetric(median(oursAns)/median(theirsAns), "ratio-answer")
	b.ReportMetric(median(oursEnd), "ms/"+what+"-return-median")
	b.ReportMetric(median(theirsExit), "ms/docker-run-exit-median")
	b.ReportMetric(median(oursEnd)/median(theirsExit), "ratio-return")
	ph.report(b)
}
