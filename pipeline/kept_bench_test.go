package pipeline

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/scripted"
)

// answers is a script of n identical one-line answers.
func answers(n int) []scripted.Turn {
	turns := make([]scripted.Turn, n)
	for i := range turns {
		turns[i] = scripted.Turn{Text: "Done."}
	}
	return turns
}

func median(d []float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkKeptFollowUp: a follow-up turn of a kept chat (keep_alive, the
// real CLI in Docker behind the bridge, scripted model), request to the
// first text delta, median; and the chat's first (cold) turn for scale.
func BenchmarkKeptFollowUp(b *testing.B) {
	ctx := context.Background()
	e := newKeptEnv(b, ctx, 5*time.Minute, answers(b.N+10), nil)
	_, cold := e.turn(b, ctx, "bench", "hello")
	var first []float64
	b.ResetTimer()
	for i := range b.N {
		_, tm := e.turn(b, ctx, "bench", fmt.Sprintf("message %d", i))
		if tm.Sandbox != chat.SandboxWarm {
			b.Fatalf("follow-up %d ran on a %s sandbox", i, tm.Sandbox)
		}
		first = append(first, tm.FirstTextMS)
	}
	b.ReportMetric(median(first), "ms/first-text-median")
	b.ReportMetric(cold.FirstTextMS, "ms/cold-first-text")
}

// BenchmarkNewChatVsDockerRun: a new chat's turn (no keep_alive: the
// sandbox, the bridge and the CLI started for it) against a bare
// `docker run --rm IMAGE claude -p` with the sandbox's cpu and memory
// limits, answering the same prompt from the same scripted model; runs
// paired and interleaved, medians and their ratios. Two ends are compared:
// the answer complete (our done event; the end of docker run's output)
// and the call returned (Chat, the sandbox removed; docker run's exit,
// its container removed).
func BenchmarkNewChatVsDockerRun(b *testing.B) {
	ctx := context.Background()
	image := testenv.Image(b)
	e := newKeptEnv(b, ctx, 0, answers(4*b.N+20), nil)
	var oursDone, oursRet, theirsOut, theirsExit []float64
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		var done time.Duration
		_, err := e.p.Chat(ctx, &Request{UserID: "alice", ChatID: fmt.Sprintf("new-%d", i), AssistantID: "coder", Messages: user("hello")},
			func(ev chat.Event) {
				if ev.Event == chat.Done {
					done = time.Since(start)
				}
			})
		if err != nil {
			b.Fatal(err)
		}
		oursRet = append(oursRet, chat.MS(time.Since(start)))
		oursDone = append(oursDone, chat.MS(done))
		start = time.Now()
		cmd := exec.Command("docker", "run", "--rm", "--network", "host",
			"--cpus", strconv.FormatFloat(e.coder.Sandbox.CPUs, 'f', -1, 64), "--memory", strconv.FormatInt(e.coder.Sandbox.MemoryBytes, 10),
			"-e", "ANTHROPIC_BASE_URL="+e.srv.URL, "-e", "ANTHROPIC_API_KEY=sk-ant-test",
			"-e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "-e", "DISABLE_AUTOUPDATER=1",
			image, "claude", "-p", "--model", "claude-sonnet-4-5", "hello")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(stdout)
		theirsOut = append(theirsOut, chat.MS(time.Since(start)))
		if err := cmd.Wait(); err != nil || !strings.Contains(string(out), "Done.") {
			b.Fatalf("docker run: %v: %s", err, out)
		}
		theirsExit = append(theirsExit, chat.MS(time.Since(start)))
	}
	b.ReportMetric(median(oursDone), "ms/new-chat-done-median")
	b.ReportMetric(median(theirsOut), "ms/docker-run-output-median")
	b.ReportMetric(median(oursDone)/median(theirsOut), "ratio-answer")
	b.ReportMetric(median(oursRet), "ms/new-chat-return-median")
	b.ReportMetric(median(theirsExit), "ms/docker-run-exit-median")
	b.ReportMetric(median(oursRet)/median(theirsExit), "ratio-return")
}

// BenchmarkKeptChats32x3: 32 concurrent chats of three turns each with
// keep_alive: every answer correct, nothing left after Close; reports the
// memory a kept chat holds (its container, CLI included, as docker stats
// measures it) and the follow-ups' median first text.
func BenchmarkKeptChats32x3(b *testing.B) {
	const chats, turns = 32, 3
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		e := newKeptEnv(b, ctx, 5*time.Minute, answers(chats*turns+20), nil)
		lim := assistant.DefaultLimits()
		lim.Sandboxes, lim.TurnsPerUser, lim.KeptChats, lim.KeptMemory = chats, chats, chats, 64<<30
		e.app.Config.Limits = lim
		b.StartTimer()
		var mu sync.Mutex
		var follow []float64
		var wg sync.WaitGroup
		for c := range chats {
			wg.Go(func() {
				for i := range turns {
					got, tm := e.turn(b, ctx, fmt.Sprintf("c%d", c), fmt.Sprintf("turn %d", i))
					if got != "Done." {
						b.Errorf("chat %d turn %d: %q", c, i, got)
					}
					if i > 0 {
						mu.Lock()
						follow = append(follow, tm.FirstTextMS)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		b.StopTimer()
		if kept, _ := e.p.kept.stats(); kept != chats {
			b.Errorf("%d chats kept, want %d", kept, chats)
		}
		b.ReportMetric(keptMemoryMiB(b), "MiB/kept-chat")
		b.ReportMetric(median(follow), "ms/follow-up-first-text-median")
		b.StartTimer()
	}
}

// keptMemoryMiB is the mean memory use of this test's sandbox containers.
func keptMemoryMiB(b *testing.B) float64 {
	mibs := containersMemoryMiB(b, sandbox.LabelInstance+"=pipeline-kept-test")
	var sum float64
	for _, v := range mibs {
		sum += v
	}
	return sum / float64(max(len(mibs), 1))
}

// containersMemoryMiB is the memory use of each running container with
// the labels (KEY=VALUE), as docker stats measures it.
func containersMemoryMiB(b *testing.B, labels ...string) []float64 {
	args := []string{"ps", "-q"}
	for _, l := range labels {
		args = append(args, "--filter", "label="+l)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		b.Fatal(err)
	}
	ids := strings.Fields(string(out))
	if len(ids) == 0 {
		return nil
	}
	out, err = exec.Command("docker", append([]string{"stats", "--no-stream", "--format", "{{.MemUsage}}"}, ids...)...).Output()
	if err != nil {
		b.Fatal(err)
	}
	var mibs []float64
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var v float64
		var unit string
		if _, err := fmt.Sscanf(strings.Fields(l)[0], "%f%s", &v, &unit); err == nil {
			switch unit {
			case "GiB":
				v *= 1024
			case "KiB":
				v /= 1024
			}
			mibs = append(mibs, v)
		}
	}
	return mibs
}
