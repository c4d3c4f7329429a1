package limits

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/store"
)

// peakContainers samples, until stop is closed, how many of our sandbox
// containers have a chat label starting with prefix, and returns the most
// seen at once.
func peakContainers(t testing.TB, prefix string, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	go func() {
		most := 0
		for {
			b, err := exec.Command("docker", "ps", "--filter", "label=dev.agentbox.product=agentbox",
				"--format", `{{.Label "dev.agentbox.chat"}}`).Output()
			if err == nil {
				n := 0
				for _, c := range strings.Fields(string(b)) {
					if strings.HasPrefix(c, prefix) {
						n++
					}
				}
				most = max(most, n)
			}
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return out
}

// TestOneTokenCannotRunManySandboxes is issue 17's "one token ran 15
// sandboxes at once": now 15 concurrent turns of one token get 3 sandboxes
// (limits.turns_per_user) and 12 answers 429 with Retry-After, at once.
func TestOneTokenCannotRunManySandboxes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, `"limits": {"turns_per_user": 3}`, slowScript("4s")), "")
	prefix := uniq("many")
	stop := make(chan struct{})
	peak := peakContainers(t, prefix, stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	replies := make([]reply, 15)
	var wg sync.WaitGroup
	var refusedFast atomic.Int32
	for i := range replies {
		wg.Go(func() {
			t0 := time.Now()
			replies[i] = s.chat(ctx, tokenAlice, "coder", fmt.Sprintf("%s-%d", prefix, i), "Say hi.")
			if replies[i].status == 429 && time.Since(t0) < 2*time.Second {
				refusedFast.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	ran, refused := 0, 0
	for i, r := range replies {
		switch {
		case r.err != nil:
			t.Errorf("turn %d: %v", i, r.err)
		case r.status == 200:
			if f := r.final(); f == nil || f.Error != "" {
				t.Errorf("turn %d failed: %+v", i, f)
			}
			ran++
		case r.status == 429:
			if r.header.Get("Retry-After") == "" || !strings.Contains(r.body, `"code":"too_many_turns"`) || !strings.Contains(r.body, "limits.turns_per_user") {
				t.Errorf("turn %d: 429 without Retry-After or code: %v %s", i, r.header, r.body)
			}
			refused++
		default:
			t.Errorf("turn %d: status %d %s", i, r.status, r.body)
		}
	}
	most := <-peak
	t.Logf("15 concurrent turns of one token: %d ran, %d refused with 429 (%d within 2s), at most %d sandboxes at once", ran, refused, refusedFast.Load(), most)
	if ran != 3 || refused != 12 || most > 3 {
		t.Errorf("ran %d, refused %d, peak sandboxes %d; want 3, 12, at most 3", ran, refused, most)
	}
	if refusedFast.Load() != 12 {
		t.Errorf("%d refusals came at once, want 12", refusedFast.Load())
	}
	_, metrics := s.get(t, "/metrics", tokenOperator)
	if !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="turns_per_user"} 12`) ||
		!strings.Contains(metrics, `agentbox_errors_total{code="too_many_turns"} 12`) ||
		!strings.Contains(metrics, `agentbox_turns_total{assistant="coder",outcome="ok"} 3`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "agentbox_limit_rejections_total", "agentbox_errors_total", "agentbox_turns_total"))
	}
	if left := chatContainersWithPrefix(t, prefix); len(left) != 0 {
		t.Errorf("containers left: %v", left)
	}
}

// TestConcurrentTurnsOnOneChat is issue 17's "three concurrent turns on
// one chat interleaved one transcript": now they run one after the other
// (never two sandboxes of the chat at once), in arrival order, and the
// chat's history and the CLI's session transcript hold each question
// followed by its own answer.
func TestConcurrentTurnsOnOneChat(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	app := newApp(t, "", slowScript("2s"))
	s := start(t, app, "")
	chatID := uniq("one")
	stop := make(chan struct{})
	peak := peakContainers(t, chatID, stop)
	questions := []string{"First question?", "Second question?", "Third question?"}
	replies := make([]reply, 3)
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Go(func() { replies[i] = s.chat(context.Background(), tokenAlice, "coder", chatID, q) })
		time.Sleep(300 * time.Millisecond) // arrival order
	}
	wg.Wait()
	close(stop)
	for i, r := range replies {
		if f := r.final(); r.status != 200 || f == nil || f.Error != "" {
			t.Fatalf("turn %d: status %d %s %+v %v", i, r.status, r.body, f, r.err)
		}
	}
	if most := <-peak; most != 1 {
		t.Errorf("at most %d sandboxes of the chat at once, want 1", most)
	}

	st, err := store.Open(context.Background(), filepath.Join(app, "data", "agentbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.History(context.Background(), "alice", chatID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range h {
		got = append(got, m.Role+": "+strings.TrimSpace(m.Content))
	}
	want := []string{"user: First question?", "assistant: Done.", "user: Second question?", "assistant: Done.", "user: Third question?", "assistant: Done."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("history:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The CLI's own transcript of the chat's session: the questions in
	// order, one resumed session, no second transcript from a concurrent
	// run.
	ts, _ := filepath.Glob(filepath.Join(app, "data", "workspaces", "alice", chatID, ".agentbox", "claude", "assistants", "coder", "config", "projects", "*", "*.jsonl"))
	if len(ts) != 1 {
		t.Fatalf("session transcripts: %v, want one", ts)
	}
	b, err := os.ReadFile(ts[0])
	if err != nil {
		t.Fatal(err)
	}
	last := -1
	for _, q := range questions {
		i := strings.Index(string(b), q)
		if i <= last {
			t.Errorf("transcript: %q at %d, after the previous question at %d", q, i, last)
		}
		last = i
	}
}

func chatContainersWithPrefix(t testing.TB, prefix string) []string {
	b, err := exec.Command("docker", "ps", "-a", "--filter", "label=dev.agentbox.product=agentbox",
		"--format", `{{.Names}} {{.Label "dev.agentbox.chat"}}`).Output()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) == 2 && strings.HasPrefix(f[1], prefix) {
			out = append(out, f[0])
		}
	}
	return out
}

func grepLines(s string, subs ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, sub := range subs {
			if strings.HasPrefix(l, sub) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}
