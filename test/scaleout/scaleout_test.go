package scaleout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbox/agentbox/claude"
	"github.com/agentbox/agentbox/internal/e2etest"
	"github.com/agentbox/agentbox/internal/testenv"
	"github.com/agentbox/agentbox/store"
)

// script is the coder's model for every test here. "Turn N." writes
// turnN.txt, then the agent lists every turn's file (what the workspace
// kept), saves a note through the remember host tool (hook memory), and
// answers "Done." after a second. "Stall." never answers.
func script() string {
	var b strings.Builder
	b.WriteString("turns:\n  - when: {contains: \"Stall.\"}\n    stall: true\n")
	for n := 1; n <= 9; n++ {
		fmt.Fprintf(&b, "  - when: {contains: \"Turn %d.\"}\n    tool_calls:\n"+
			"      - name: Write\n        input: {file_path: /workspace/turn%d.txt, content: \"file of turn %d\\n\"}\n", n, n, n)
	}
	b.WriteString(`  - when: {after_tool_result: Write}
    tool_calls:
      - name: Bash
        input: {command: "cat turn*.txt", description: "Show every turn's file"}
  - when: {after_tool_result: Bash}
    tool_calls:
      - name: mcp__agentbox__remember
        input: {note: "a turn ran"}
  - when: {after_tool_result: mcp__agentbox__remember}
    delay: 1s
    text: Done.
`)
	return b.String()
}

// cluster is two servers on one app folder (one data root) and one
// PostgreSQL database, and a store of the test's own on that database.
type cluster struct {
	app   string
	dsn   string
	a, b  *server
	store *store.Store
	// args are the servers' runtime flags; sandboxes lists the sandboxes
	// of a chat on that runtime.
	args      []string
	sandboxes func(t testing.TB, chatID string) []string
}

func newCluster(t *testing.T, appJSONC string) *cluster {
	t.Helper()
	return newClusterOn(t, dockerRuntime(), appJSONC)
}

// runtimeSetup is what a cluster needs of its sandbox runtime.
type runtimeSetup struct {
	appDir    string // the parent of the app folder ("": a temporary one)
	sandbox   string // app.jsonc's "sandbox" block
	args      []string
	sandboxes func(t testing.TB, chatID string) []string
}

func dockerRuntime() runtimeSetup {
	return runtimeSetup{sandbox: `{"runtime": "docker"}`, sandboxes: e2etest.ChatContainers}
}

func newClusterOn(t *testing.T, rt runtimeSetup, appJSONC string) *cluster {
	t.Helper()
	pg := testenv.Postgres(t)
	c := &cluster{dsn: pg.NewDatabase(t), args: rt.args, sandboxes: rt.sandboxes}
	c.app = newAppIn(t, rt.appDir, rt.sandbox, appJSONC, script())
	c.a = start(t, "A", c.app, c.dsn, c.args...)
	c.b = start(t, "B", c.app, c.dsn, c.args...)
	st, err := store.OpenConfig(context.Background(), store.Config{Driver: "postgres", DSN: c.dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c.store = st
	return c
}

func (c *cluster) workspace(chatID string) string {
	return filepath.Join(c.app, "data", "workspaces", "alice", chatID)
}

// turns is the chat's turns holding or waiting for it, on both servers.
func (c *cluster) turns(t testing.TB, chatID string) int {
	n, err := c.store.ChatTurns(context.Background(), "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// history is the chat's stored history as "role: content" lines.
func (c *cluster) history(t testing.TB, chatID string) []string {
	h, err := c.store.History(context.Background(), "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range h {
		out = append(out, m.Role+": "+strings.TrimSpace(m.Content))
	}
	return out
}

func mustDone(t testing.TB, what string, r e2etest.Reply) {
	t.Helper()
	if f := r.Final(); r.Status != 200 || r.Err != nil || f == nil || f.Error != "" {
		t.Fatalf("%s: status %d %s %+v %v", what, r.Status, r.Body, f, r.Err)
	}
	if !strings.Contains(r.Final().Content, "Done.") {
		t.Fatalf("%s: answered %q", what, r.Final().Content)
	}
}

// transcript is the CLI's session transcript of the chat (one file: every
// turn resumed the same session).
func (c *cluster) transcript(t testing.TB, chatID string) string {
	t.Helper()
	ts, _ := filepath.Glob(filepath.Join(c.workspace(chatID), filepath.FromSlash(claude.ConfigPaths("coder").Config), "projects", "*", "*.jsonl"))
	if len(ts) != 1 {
		t.Fatalf("session transcripts: %v, want one", ts)
	}
	b, err := os.ReadFile(ts[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTwoServersShareChats: one chat's turns alternate between two
// servers, and concurrent turns of one chat through both run one at a
// time, in arrival order, with a full line refused.
func TestTwoServersShareChats(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	c := newCluster(t, `"limits": {"chat_queue": 1, "chat_wait": "3m"}`)
	ctx := context.Background()

	t.Run("alternating", func(t *testing.T) { alternating(t, c) })
	t.Run("concurrent", func(t *testing.T) {
		chatID := e2etest.NewID("conc")
		stop := make(chan struct{})
		peak := e2etest.PeakContainers(chatID, true, stop)
		var wg sync.WaitGroup
		var first, second e2etest.Reply
		wg.Go(func() { first = c.a.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 5. Add your file.") })
		e2etest.WaitUntil(t, 2*time.Minute, "A's turn to hold the chat", func() bool { return c.turns(t, chatID) == 1 })
		wg.Go(func() { second = c.b.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 6. Add your file.") })
		e2etest.WaitUntil(t, time.Minute, "B's turn to wait for the chat A holds", func() bool { return c.turns(t, chatID) == 2 })
		// The chat's line (chat_queue 1) is full across both servers.
		third := c.a.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 7. Add your file.")
		if third.Status != 409 || !strings.Contains(third.Body, `"code":"chat_busy"`) || third.Header.Get("Retry-After") == "" {
			t.Errorf("a third turn with A running and B waiting: %d %s, want 409 chat_busy", third.Status, third.Body)
		}
		wg.Wait()
		close(stop)
		mustDone(t, "A's turn", first)
		mustDone(t, "B's turn", second)
		if most := <-peak; most != 1 {
			t.Errorf("at most %d sandboxes of the chat at once, want 1", most)
		}
		want := []string{"user: Turn 5. Add your file.", "assistant: Done.", "user: Turn 6. Add your file.", "assistant: Done."}
		if got := c.history(t, chatID); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("history:\n%s\nwant (A's turn, then B's):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		tr := c.transcript(t, chatID)
		if i, j := strings.Index(tr, "Turn 5."), strings.Index(tr, "Turn 6."); i < 0 || j < i {
			t.Errorf("transcript: turn 5 at %d, turn 6 at %d", i, j)
		}
		if !strings.Contains(tr, `file of turn 5\nfile of turn 6`) {
			t.Error("transcript: B's turn did not see A's file")
		}
	})
}

// alternating: one chat's turns alternate between the two servers, with
// history, hook memory, workspace files and the CLI's session intact.
func alternating(t *testing.T, c *cluster) (chatID string) {
	ctx := context.Background()
	chatID = e2etest.NewID("alt")
	servers := []*server{c.a, c.b, c.a, c.b}
	for i, s := range servers {
		mustDone(t, fmt.Sprintf("turn %d on %s", i+1, s.name), s.Chat(ctx, e2etest.TokenAlice, "coder", chatID, fmt.Sprintf("Turn %d. Add your file.", i+1)))
	}
	// History: every turn's question and answer, in order, whichever
	// server wrote it.
	var want []string
	for i := range servers {
		want = append(want, fmt.Sprintf("user: Turn %d. Add your file.", i+1), "assistant: Done.")
	}
	if got := c.history(t, chatID); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Hook memory: the remember tool's notes of all four turns, and
	// the Next hook's last commit.
	notes, _, err := c.store.MemGet(ctx, "chat", "alice/"+chatID, "notes")
	var list []string
	if err != nil || json.Unmarshal(notes, &list) != nil || len(list) != 4 {
		t.Errorf("chat memory notes = %s, %v; want four", notes, err)
	}
	head, found, _ := c.store.MemGet(ctx, "chat", "alice/"+chatID, "last_commit")
	// Workspace: every turn's file, and one git commit per turn (the
	// Create hook made the repository on A; B committed into it).
	for i := range servers {
		if b, err := os.ReadFile(filepath.Join(c.workspace(chatID), fmt.Sprintf("turn%d.txt", i+1))); err != nil || string(b) != fmt.Sprintf("file of turn %d\n", i+1) {
			t.Errorf("turn%d.txt = %q, %v", i+1, b, err)
		}
	}
	out, err := exec.Command("git", "-c", "safe.directory=*", "-C", c.workspace(chatID), "log", "--format=%h %s").Output()
	commits := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(commits) != 4 {
		t.Errorf("git log: %v %v, want 4 commits", commits, err)
	} else if !found || !strings.HasPrefix(commits[0], strings.Trim(string(head), `"`)+" ") {
		t.Errorf("memory last_commit = %s, the workspace's head is %s", head, commits[0])
	}
	// The CLI's session resumed across servers: one transcript with the
	// four questions in order, and the last turn saw all four files.
	tr := c.transcript(t, chatID)
	last := -1
	for i := range servers {
		j := strings.Index(tr, fmt.Sprintf("Turn %d. Add your file.", i+1))
		if j <= last {
			t.Errorf("transcript: turn %d at %d, after the previous one at %d", i+1, j, last)
		}
		last = j
	}
	if !strings.Contains(tr, `file of turn 1\nfile of turn 2\nfile of turn 3\nfile of turn 4`) {
		t.Error("transcript: the last turn's listing does not show all four files")
	}
	return chatID
}

// TestKilledServerReleasesItsChat: a server SIGKILLed while its turn holds
// a chat releases it at once (PostgreSQL ends its session with its
// connection): the other server's turn on that chat runs right away. The
// killed server's sandbox is removed when it restarts.
func TestKilledServerReleasesItsChat(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	killedServer(t, newCluster(t, `"limits": {"chat_wait": "3m"}`))
}

// killedServer: a server SIGKILLed mid-turn releases its chat at once, the
// other serves the chat's next turn, and the killed server's sandbox is
// removed once its restart (or the other's reaper) runs.
func killedServer(t *testing.T, c *cluster) {
	ctx := context.Background()
	chatID := e2etest.NewID("kill")
	go c.a.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Stall.")
	e2etest.WaitUntil(t, 2*time.Minute, "A's turn to run its sandbox", func() bool {
		return c.turns(t, chatID) == 1 && len(c.sandboxes(t, chatID)) == 1
	})
	c.a.Stop(syscall.SIGKILL, 30*time.Second)
	t0 := time.Now()
	e2etest.WaitUntil(t, 10*time.Second, "the killed server's chat to be free", func() bool { return c.turns(t, chatID) == 0 })
	t.Logf("the chat was free %s after the kill", time.Since(t0).Round(time.Millisecond))
	if len(c.sandboxes(t, chatID)) != 1 {
		t.Fatal("the killed server's sandbox is gone already: the test proves less than it says")
	}

	t0 = time.Now()
	mustDone(t, "B's turn after the kill", c.b.Chat(ctx, e2etest.TokenAlice, "coder", chatID, "Turn 1. Add your file."))
	t.Logf("B's turn took %s", time.Since(t0).Round(time.Millisecond))
	if got := c.history(t, chatID); strings.Join(got, "|") != "user: Turn 1. Add your file.|assistant: Done." {
		t.Errorf("history: %v", got)
	}
	// The killed server, restarted (its TMPDIR the same), reaps its
	// sandbox and the host's side of it: the workspace's mount in the
	// slot the sandbox was started in.
	startIn(t, c.a.tmp, "A2", c.app, c.dsn, c.args...)
	e2etest.WaitUntil(t, time.Minute, "the killed server's sandbox to be reaped", func() bool { return len(c.sandboxes(t, chatID)) == 0 })
	e2etest.WaitUntil(t, time.Minute, "the killed server's mounts to be removed", func() bool { return len(mountsUnder(t, c.a.tmp)) == 0 })
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			points = append(points, f[4])
		}
	}
	return points
}
