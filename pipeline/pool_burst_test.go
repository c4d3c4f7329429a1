//go:build linux

package pipeline

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/sandbox"
	"github.com/agentbox/agentbox/sandbox/docker"
	"github.com/agentbox/agentbox/scripted"
)

// A burst is new chats arriving at once at a server on a small host: the
// real Claude Code CLI in Docker behind the bridge, a scripted model that
// answers each chat with its own text, workspaces as serve makes them
// (loop-mounted images where the host allows, kept mounted after their
// turn), limits.sandboxes slots and the others in line for one, and a warm
// pool of some size filled before the chats come. It runs in a TMPDIR of
// its own, so that what it leaves (mounts, loop devices, pool slots) is
// told from what other processes on the host hold.

// TestPool32NewChatsInDocker: 32 new chats arrive at once with a warm
// pool of 4 and 8 sandbox slots (runBurst): each gets its own answer, the
// first ones on pooled sandboxes, the rest on their own, and nothing is
// left after Close. BenchmarkPool32NewChats measures the same burst.
func TestPool32NewChatsInDocker(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	testenv.Root(t, "for the warm pool to attach workspaces with mounts")
	r := runBurst(t, burstSpec{chats: burstChats, pool: 4, slots: 8})
	if r.pooled < 1 {
		t.Errorf("no chat claimed one of the 4 pooled sandboxes")
	}
	r.log(t)
}

// BenchmarkPool32NewChats: 32 new chats arriving at once (runBurst) with
// 8 sandbox slots, with a warm pool of 4 and without one, interleaved:
// request to first text delta p50, p90 and max, the pooled chats, the
// time from the first request to the last answer, the parts of a turn
// the chats waited for, and the host's CPU time a chat took in each arm;
// the load average before and after. Every answer must be its chat's own and
// nothing may be left after Close.
func BenchmarkPool32NewChats(b *testing.B) {
	load := loadAverage(b)
	var pooled, cold []burstResult
	for i := range b.N {
		arms := []int{4, 0}
		if i%2 == 1 {
			slices.Reverse(arms)
		}
		for _, size := range arms {
			r := runBurst(b, burstSpec{chats: burstChats, pool: size, slots: 8})
			r.log(b)
			if size > 0 {
				if r.pooled == 0 {
					b.Fatalf("no chat claimed one of the %d pooled sandboxes", size)
				}
				pooled = append(pooled, r)
			} else {
				cold = append(cold, r)
			}
		}
	}
	b.StopTimer()
	all := func(rs []burstResult, f func(burstResult) []float64) []float64 {
		var out []float64
		for _, r := range rs {
			out = append(out, f(r)...)
		}
		return out
	}
	first := func(r burstResult) []float64 { return r.firstText() }
	wall := func(r burstResult) []float64 { return []float64{r.wall.Seconds()} }
	ft, cft := all(pooled, first), all(cold, first)
	b.ReportMetric(pct(ft, 50), "ms/first-text-p50")
	b.ReportMetric(pct(ft, 90), "ms/first-text-p90")
	b.ReportMetric(pct(ft, 100), "ms/first-text-max")
	b.ReportMetric(pct(cft, 50), "ms/no-pool-first-text-p50")
	b.ReportMetric(pct(cft, 90), "ms/no-pool-first-text-p90")
	b.ReportMetric(pct(cft, 100), "ms/no-pool-first-text-max")
	b.ReportMetric(pct(ft, 50)/pct(cft, 50), "ratio-first-text-p50")
	b.ReportMetric(median(all(pooled, wall)), "s/burst")
	b.ReportMetric(median(all(cold, wall)), "s/no-pool-burst")
	var n float64
	for _, r := range pooled {
		n += float64(r.pooled)
	}
	b.ReportMetric(n/float64(len(pooled)), "chats-pooled")
	phase := func(d func(map[string]interval) time.Duration) func(burstResult) []float64 {
		return func(r burstResult) []float64 { return r.phase(d) }
	}
	b.ReportMetric(pct(all(pooled, phase(burstSlotWait)), 50), "ms/slot-wait-p50")
	b.ReportMetric(pct(all(pooled, phase(burstCLIStart)), 50), "ms/cli-start-p50")
	b.ReportMetric(pct(all(pooled, phase(burstHeld)), 50), "ms/slot-held-p50")
	// The host's CPU a chat took, per arm: more than the other arm's is
	// other work on the host during that arm.
	cpuPerChat := func(rs []burstResult) float64 {
		var cpu, chats float64
		for _, r := range rs {
			cpu, chats = cpu+r.cpu.Seconds(), chats+float64(len(r.chats))
		}
		return cpu / chats
	}
	b.ReportMetric(cpuPerChat(pooled), "host-cpu-s/chat")
	b.ReportMetric(cpuPerChat(cold), "no-pool-host-cpu-s/chat")
	b.ReportMetric(load, "load1-before")
	b.ReportMetric(loadAverage(b), "load1-after")
}

// burstSpec is a burst: how many chats, the pool's size and the slots.
type burstSpec struct {
	chats, pool, slots int
}

// burstChat is one chat of a burst: its done event's timings and its
// turn's phases (from the trace, with the sandbox's removal that came
// after the done event).
type burstChat struct {
	tm     *chat.Timings
	phases map[string]interval
}

// burstResult is what a burst measured.
type burstResult struct {
	spec  burstSpec
	chats []burstChat
	// pooled counts the chats that claimed a pooled sandbox, refilled
	// the pooled sandboxes made while the chats ran.
	pooled, refilled int
	// wall is from the first request to the last answer's return.
	wall time.Duration
	// cpu is the host's busy CPU time over wall (every process on it,
	// the engine's and other work's included).
	cpu time.Duration
	// self and engine are the shares of cpu of this process (the
	// pipeline, the bridge's host side, the hooks, the scripted model;
	// with the programs it ran: mkfs) and of the Docker engine (dockerd, containerd); the rest is the
	// sandboxes' (the CLIs), their shims and runc, and the kernel's.
	self, engine time.Duration
	// disk is the workspaces' disk mode.
	disk sandbox.DiskMode
}

// burstChats is the chats' count the README quotes.
const burstChats = 32

// runBurst runs a burst: every chat must get its own answer, and after
// Close (the pipeline's, then the workspaces', as serve closes them)
// nothing of the burst may be left: containers, mounts or loop devices
// under its TMPDIR, pool slots, processes. It fails tb with all it found.
func runBurst(tb testing.TB, spec burstSpec) burstResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	root := e2etest.ShortDir(tb)
	// Registered after ShortDir's removal, so run before it: a mount the
	// burst left is a failure, not files removed under it.
	tb.Cleanup(func() { e2etest.UnmountUnder(tb, root) })
	tb.Setenv("TMPDIR", root)

	var turns []scripted.Turn
	for c := range spec.chats {
		turns = append(turns, scripted.Turn{When: &scripted.Match{Contains: burstQuestion(c)}, Text: burstAnswer(c)})
	}
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	mode, why := sandbox.DetectDiskMode(ctx, filepath.Join(root, "data"))
	if mode != sandbox.DiskLoop {
		tb.Logf("workspaces not loop-mounted on this host (%s): their disk is measured", why)
	}
	ws, err := sandbox.NewWorkspacesWith(filepath.Join(root, "data"), sandbox.WorkspacesOptions{
		UID: 1000, GID: 1000, Disk: mode, KeepMounted: sandbox.DefaultKeepMounted})
	if err != nil {
		tb.Fatal(err)
	}
	e := poolEnvWith(tb, ctx, benchCLIs[0], spec.pool, turns, func(c *Config) {
		c.TracerProvider, c.Workspaces = tp, ws
		app := c.App.Current()
		// The disk limit a loaded assistant has by default; spec.slots
		// sandboxes at once, the others in line for one.
		app.Assistants["coder"].Sandbox.DiskBytes = assistant.DefaultDisk
		lim := assistant.DefaultLimits()
		lim.Sandboxes, lim.SandboxWait, lim.TurnsPerUser = spec.slots, 10*time.Minute, spec.chats
		app.Config.Limits = lim
	})
	e.ws = ws
	waitReady(tb, ctx, e.p, spec.pool)
	rt := e.p.cfg.Runtimes["docker"].(*docker.Runtime)
	procs := descendants()

	res := burstResult{spec: spec, disk: mode}
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	made := e.p.Pool().Made
	cpu0, self0, engine0 := hostBusy(tb), procCPU(isSelf), procCPU(isEngine)
	start := time.Now()
	for c := range spec.chats {
		wg.Go(func() {
			id := fmt.Sprintf("c%d", c)
			got, tm, err := tryChat(ctx, e.p, "coder", id, "this is "+burstQuestion(c))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("chat %d: %v", c, err))
			case got != burstAnswer(c):
				problems = append(problems, fmt.Sprintf("chat %d: %q, want %q", c, got, burstAnswer(c)))
			case tm == nil || tm.FirstTextMS == 0:
				problems = append(problems, fmt.Sprintf("chat %d: no first text in its timings %+v", c, tm))
			default:
				res.chats = append(res.chats, burstChat{tm: tm, phases: turnPhases(spans.Ended(), id)})
				if tm.Sandbox == chat.SandboxPooled {
					res.pooled++
				}
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	res.cpu, res.self, res.engine = hostBusy(tb)-cpu0, procCPU(isSelf)-self0, procCPU(isEngine)-engine0
	res.refilled = int(e.p.Pool().Made - made)

	if err := e.p.Close(ctx); err != nil {
		problems = append(problems, "pipeline close: "+err.Error())
	}
	if err := ws.Close(ctx); err != nil {
		problems = append(problems, "workspaces close: "+err.Error())
	}
	problems = append(problems, burstLeftovers(tb, rt, root, procs)...)
	if len(problems) > 0 {
		tb.Fatalf("burst of %d chats, pool %d, %d slots:\n%s", spec.chats, spec.pool, spec.slots, strings.Join(problems, "\n"))
	}
	return res
}

// burstQuestion and burstAnswer are chat c's message and its answer: the
// scripted model matches the one and answers the other, so a chat that
// got another's answer is seen.
func burstQuestion(c int) string { return fmt.Sprintf("chat-%d?", c) }
func burstAnswer(c int) string   { return fmt.Sprintf("Answer %d.", c) }

// turnPhases are the phases of chat's turn in spans: each phase span, and
// the CLI's start and the wait for the first text.
func turnPhases(spans []sdktrace.ReadOnlySpan, chatID string) map[string]interval {
	var root sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() != "agentbox.turn" {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "agentbox.chat" && a.Value.AsString() == chatID {
				root = s
			}
		}
	}
	if root == nil {
		return nil
	}
	out := map[string]interval{"turn": {root.StartTime(), root.EndTime()}}
	for _, s := range spans {
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() && s != root {
			out[s.Name()] = interval{s.StartTime(), s.EndTime()}
		}
	}
	return out
}

// burstLeftovers lists what a closed burst left: containers of its run,
// mounts and loop devices under root (its TMPDIR: the workspaces, the
// pool's slots, the bridge's folders), pool slot folders, and processes
// this one started since procs. The kernel detaches a loop device some
// time after its last unmount (seconds on a loaded host), and a process
// may be in its last moments: what is left is what a minute did not take.
func burstLeftovers(tb testing.TB, rt *docker.Runtime, root string, procs map[int]string) []string {
	deadline := time.Now().Add(time.Minute)
	for {
		left := burstLeft(tb, rt, root, procs)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// burstLeft is what burstLeftovers finds now.
func burstLeft(tb testing.TB, rt *docker.Runtime, root string, procs map[int]string) []string {
	var left []string
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label="+docker.LabelRun+"="+docker.RunID(rt)).Output()
	if err != nil {
		tb.Fatal(err)
	}
	for _, id := range strings.Fields(string(out)) {
		left = append(left, "container "+id)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(sandbox.UnescapeMountPath(f[4]), root+"/") {
				left = append(left, "mount "+sandbox.UnescapeMountPath(f[4]))
			}
		}
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range loops {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(strings.TrimSpace(string(b)), root+"/") {
			left = append(left, "loop device "+filepath.Base(filepath.Dir(filepath.Dir(f)))+" on "+strings.TrimSpace(string(b)))
		}
	}
	slots, _ := os.ReadDir(rt.PoolDir())
	for _, s := range slots {
		left = append(left, "pool slot "+s.Name())
	}
	for pid, cmd := range descendants() {
		if procs[pid] != cmd {
			left = append(left, fmt.Sprintf("process %d (%s)", pid, cmd))
		}
	}
	return left
}

// proc is a process as /proc/PID/stat shows it.
type proc struct {
	pid, ppid int
	comm      string
	zombie    bool
	// cpu is its CPU time with that of the children it waited for.
	cpu time.Duration
}

// procs are the host's processes.
func procs() []proc {
	ents, _ := os.ReadDir("/proc")
	var out []proc
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + en.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		// utime, stime, cutime and cstime are fields 14 to 17.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 15 {
			continue
		}
		pr := proc{pid: pid, comm: s[strings.IndexByte(s, '(')+1 : i], zombie: f[0] == "Z"}
		pr.ppid, _ = strconv.Atoi(f[1])
		for _, v := range f[11:15] {
			n, _ := strconv.ParseUint(v, 10, 64)
			pr.cpu += time.Duration(n) * 10 * time.Millisecond // USER_HZ is 100 on Linux
		}
		out = append(out, pr)
	}
	return out
}

// descendants are this process's descendant processes, by pid, with their
// command names (and "zombie" for one that ended unwaited).
func descendants() map[int]string {
	children := map[int][]proc{}
	for _, pr := range procs() {
		children[pr.ppid] = append(children[pr.ppid], pr)
	}
	out := map[int]string{}
	next := []int{os.Getpid()}
	for len(next) > 0 {
		pid := next[0]
		next = next[1:]
		for _, c := range children[pid] {
			out[c.pid] = c.comm
			if c.zombie {
				out[c.pid] += " zombie"
			}
			next = append(next, c.pid)
		}
	}
	return out
}

// hostBusy is the host's busy CPU time since boot, all cores added up
// (/proc/stat: all but idle and iowait).
func hostBusy(tb testing.TB) time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		tb.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy uint64
	for i, v := range f[1:] {
		n, _ := strconv.ParseUint(v, 10, 64)
		if i != 3 && i != 4 && i < 7 { // not idle, iowait, steal; guest time is in user
			busy += n
		}
	}
	// USER_HZ is 100 on Linux.
	return time.Duration(busy) * 10 * time.Millisecond
}

// procCPU is the CPU time of the processes match picks.
func procCPU(match func(pid int, comm string) bool) time.Duration {
	var d time.Duration
	for _, pr := range procs() {
		if match(pr.pid, pr.comm) {
			d += pr.cpu
		}
	}
	return d
}

func isSelf(pid int, _ string) bool { return pid == os.Getpid() }

func isEngine(_ int, comm string) bool { return comm == "dockerd" || comm == "containerd" }

// loadAverage is the host's one-minute load average.
func loadAverage(tb testing.TB) float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		tb.Fatal(err)
	}
	v, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// firstText is every chat's request to first text delta, ms.
func (r burstResult) firstText() []float64 {
	out := make([]float64, len(r.chats))
	for i, c := range r.chats {
		out[i] = c.tm.FirstTextMS
	}
	return out
}

// phase is each chat's d (ms) computed from its phases; chats without
// them are left out.
func (r burstResult) phase(d func(map[string]interval) time.Duration) []float64 {
	var out []float64
	for _, c := range r.chats {
		if c.phases != nil {
			out = append(out, float64(d(c.phases))/float64(time.Millisecond))
		}
	}
	return out
}

// The parts of a burst chat's turn, from its phases.
var (
	burstSlotWait = func(p map[string]interval) time.Duration { return p[phaseSandboxWait].dur() }
	burstCreate   = func(p map[string]interval) time.Duration { return p[phaseSandboxCreate].dur() }
	burstCLIStart = func(p map[string]interval) time.Duration { return p["cli_start"].dur() }
	// burstModel is from the CLI's first line to the first text delta:
	// the CLI's request to the model and the answer's way back.
	burstModel = func(p map[string]interval) time.Duration {
		return interval{p["cli_start"].end, p["first_text_delta"].end}.dur()
	}
	// burstAfter is from the first text to the CLI's exit.
	burstAfter = func(p map[string]interval) time.Duration {
		return interval{p["first_text_delta"].end, p[phaseExecute].end}.dur()
	}
	burstRemove = func(p map[string]interval) time.Duration { return p[phaseSandboxRemove].dur() }
	// burstHeld is how long the chat held its sandbox slot: from the end
	// of its wait to its sandbox's removal.
	burstHeld = func(p map[string]interval) time.Duration {
		return interval{p[phaseSandboxWait].end, p[phaseSandboxRemove].end}.dur()
	}
)

// pct is the p-th percentile of v (the nearest rank at or above it).
func pct(v []float64, p int) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// log logs r on one line (a benchmark's log keeps ten): the first
// text's distribution, how busy the slots and the host's CPU were, and
// the parts of a turn, p50/p90 in ms.
func (r burstResult) log(tb testing.TB) {
	tb.Helper()
	ft := r.firstText()
	var held float64
	for _, v := range r.phase(burstHeld) {
		held += v
	}
	var parts []string
	for _, p := range []struct {
		name string
		d    func(map[string]interval) time.Duration
	}{
		{"slot wait", burstSlotWait}, {"sandbox create", burstCreate}, {"CLI start", burstCLIStart},
		{"CLI ready to first text", burstModel}, {"first text to CLI exit", burstAfter}, {"sandbox remove", burstRemove},
		{"slot held", burstHeld},
	} {
		v := r.phase(p.d)
		parts = append(parts, fmt.Sprintf("%s %.0f/%.0f", p.name, pct(v, 50), pct(v, 90)))
	}
	tb.Logf("%d chats, pool %d, %d slots, workspaces %s: first text p50 %.0f ms, p90 %.0f ms, max %.0f ms; %d on pooled sandboxes (%d made meanwhile); "+
		"%.1f s from the first request to the last answer, the slots %.0f%% held, host CPU %.1f s busy (%.2f s a chat: this process %.2f s, the engine %.2f s); p50/p90 ms: %s",
		r.spec.chats, r.spec.pool, r.spec.slots, r.disk, pct(ft, 50), pct(ft, 90), pct(ft, 100), r.pooled, r.refilled,
		r.wall.Seconds(), 100*held/float64(r.spec.slots)/float64(r.wall.Milliseconds()), r.cpu.Seconds(), r.cpu.Seconds()/float64(len(r.chats)),
		r.self.Seconds()/float64(len(r.chats)), r.engine.Seconds()/float64(len(r.chats)), strings.Join(parts, ", "))
}
