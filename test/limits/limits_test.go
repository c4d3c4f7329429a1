package limits

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/e2etest"

	"github.com/agentbox/agentbox/store"
)

// TestOneTokenCannotRunManySandboxes is issue 17's "one token ran 15
// sandboxes at once": now 15 concurrent turns of one token get 3 sandboxes
// (limits.turns_per_user) and 12 answers 429 with Retry-After, at once.
func TestOneTokenCannotRunManySandboxes(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: integration test")
	}
	t.Parallel()
	s := start(t, newApp(t, `"limits": {"turns_per_user": 3}`, slowScript("4s")), "")
	prefix := e2etest.NewID("many")
	stop := make(chan struct{})
	peak := e2etest.PeakContainers(prefix, false, stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	replies := make([]e2etest.Reply, 15)
	var wg sync.WaitGroup
	var refusedFast atomic.Int32
	for i := range replies {
		wg.Go(func() {
			t0 := time.Now()
			replies[i] = s.Chat(ctx, e2etest.TokenAlice, "coder", fmt.Sprintf("%s-%d", prefix, i), "Say hi.")
			if replies[i].Status == 429 && time.Since(t0) < 2*time.Second {
				refusedFast.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	ran, refused := 0, 0
	for i, r := range replies {
		switch {
		case r.Err != nil:
			t.Errorf("turn %d: %v", i, r.Err)
		case r.Status == 200:
			if f := r.Final(); f == nil || f.Error != "" {
				t.Errorf("turn %d failed: %+v", i, f)
			}
			ran++
		case r.Status == 429:
			if r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, `"code":"too_many_turns"`) || !strings.Contains(r.Body, "limits.turns_per_user") {
				t.Errorf("turn %d: 429 without Retry-After or code: %v %s", i, r.Header, r.Body)
			}
			refused++
		default:
			t.Errorf("turn %d: status %d %s", i, r.Status, r.Body)
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
	// A response ends with its done event; the turn's record and its
	// sandbox's removal follow it.
	e2etest.NoPrefixContainers(t, prefix, time.Minute)
	var metrics string
	e2etest.WaitUntil(t, time.Minute, "the turns' records", func() bool {
		_, metrics = s.get(t, "/metrics", e2etest.TokenOperator)
		return strings.Contains(metrics, `agentbox_turns_total{assistant="coder",outcome="ok"} 3`)
	})
	if !strings.Contains(metrics, `agentbox_limit_rejections_total{limit="turns_per_user"} 12`) ||
		!strings.Contains(metrics, `agentbox_errors_total{code="too_many_turns"} 12`) {
		t.Errorf("metrics:\n%s", grepLines(metrics, "agentbox_limit_rejections_total", "agentbox_errors_total", "agentbox_turns_total"))
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
	chatID := e2etest.NewID("one")
	stop := make(chan struct{})
	peak := e2etest.PeakContainers(chatID, false, stop)
	questions := []string{"First question?", "Second question?", "Third question?"}
	replies := make([]e2etest.Reply, 3)
	var wg sync.WaitGroup
	for i, q := range questions {
		wg.Go(func() { replies[i] = s.Chat(context.Background(), e2etest.TokenAlice, "coder", chatID, q) })
		time.Sleep(300 * time.Millisecond) // arrival order
	}
	wg.Wait()
	close(stop)
	for i, r := range replies {
		if f := r.Final(); r.Status != 200 || f == nil || f.Error != "" {
			t.Fatalf("turn %d: status %d %s %+v %v", i, r.Status, r.Body, f, r.Err)
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
