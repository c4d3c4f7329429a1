package breaker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentbox/agentbox/chat"
)

func TestOutcomes(t *testing.T) {
	t.Parallel()
	codes := map[string]Outcome{
		"": Success, chat.ErrNetwork: Failure, chat.ErrUpstream: Failure, chat.ErrTimeout: Failure,
		chat.ErrRateLimit: Ignore, chat.ErrCanceled: Ignore, chat.ErrCircuitOpen: Ignore,
		chat.ErrAuth: Success, chat.ErrInvalidRequest: Success,
	}
	for code, want := range codes {
		if got := OfCode(code); got != want {
			t.Errorf("OfCode(%q) = %v, want %v", code, got, want)
		}
	}
	statuses := map[int]Outcome{200: Success, 400: Success, 401: Success, 404: Success, 408: Failure,
		429: Ignore, 500: Failure, 502: Failure, 503: Failure, 529: Failure}
	for st, want := range statuses {
		if got := OfStatus(st); got != want {
			t.Errorf("OfStatus(%d) = %v, want %v", st, got, want)
		}
	}
}

// call makes one call with outcome o and returns Allow's error.
func call(b *Breaker, o Outcome) error {
	done, err := b.Allow()
	if err != nil {
		return err
	}
	done(o)
	return nil
}

func TestBreakerOpensProbesAndCloses(t *testing.T) {
	t.Parallel()
	s := NewSet(Settings{Failures: 3, Cooldown: 80 * time.Millisecond}, nil)
	b := s.Get("anthropic.sonnet")
	if s.Get("anthropic.sonnet") != b {
		t.Fatal("Get made a second breaker for one name")
	}
	// Ignored calls and successes in between do not add up to an opening.
	for _, o := range []Outcome{Failure, Failure, Ignore, Success, Failure, Failure, Ignore} {
		if err := call(b, o); err != nil {
			t.Fatalf("call refused while closed: %v", err)
		}
	}
	if b.State() != Closed {
		t.Fatalf("state = %s after 2 failures in a row, want closed", b.State())
	}
	if err := call(b, Failure); err != nil {
		t.Fatal(err)
	}
	if b.State() != Open {
		t.Fatalf("state = %s after 3 failures in a row, want open", b.State())
	}
	err := call(b, Success)
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrCircuitOpen || !errors.Is(err, ErrOpen) {
		t.Fatalf("open breaker: err = %v, want a circuit_open chat.Error", err)
	}
	if ce.RetryAfter <= 0 || !strings.Contains(ce.Message, "anthropic.sonnet") || !strings.Contains(ce.Message, "3 calls in a row") {
		t.Errorf("open error = %+v", ce)
	}
	if b.Check() == nil {
		t.Error("Check of an open breaker = nil")
	}

	time.Sleep(100 * time.Millisecond)
	if b.Check() != nil {
		t.Error("Check after the cooldown refused: it must leave the probe to a call")
	}
	// Half-open: one probe at a time; a failed probe opens it again.
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	if b.State() != HalfOpen {
		t.Fatalf("state during the probe = %s", b.State())
	}
	if err := call(b, Success); err == nil {
		t.Error("a second call went through while the probe runs")
	}
	done(Failure)
	done(Success) // a second done is ignored
	if b.State() != Open {
		t.Fatalf("state after a failed probe = %s, want open", b.State())
	}
	time.Sleep(100 * time.Millisecond)
	if err := call(b, Success); err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	if b.State() != Closed {
		t.Fatalf("state after a good probe = %s, want closed", b.State())
	}
	st := b.Status()
	if st.Opened != 2 || st.Rejected < 2 {
		t.Errorf("status = %+v, want opened 2 and some rejections", st)
	}
}

func TestIgnoredProbeLetsAnotherThrough(t *testing.T) {
	t.Parallel()
	b := NewSet(Settings{Failures: 1, Cooldown: 20 * time.Millisecond}, nil).Get("c")
	_ = call(b, Failure)
	time.Sleep(30 * time.Millisecond)
	if err := call(b, Ignore); err != nil { // the probe's caller gave up
		t.Fatal(err)
	}
	if err := call(b, Success); err != nil {
		t.Fatalf("after an ignored probe: %v", err)
	}
	if b.State() != Closed {
		t.Fatalf("state = %s", b.State())
	}
}

func TestNilBreakerAllowsEverything(t *testing.T) {
	t.Parallel()
	var s *Set
	b := s.Get("x")
	for range 10 {
		if err := call(b, Failure); err != nil {
			t.Fatal(err)
		}
	}
	if b.State() != Closed || b.Check() != nil || s.Statuses() != nil {
		t.Error("a nil breaker is not an always-closed one")
	}
}

func TestConfigureAndMetrics(t *testing.T) {
	t.Parallel()
	s := NewSet(Settings{Failures: 1, Cooldown: time.Hour}, nil)
	_ = call(s.Get("b.one"), Failure)
	_ = call(s.Get("a.two"), Success)
	_ = call(s.Get("b.one"), Success) // refused
	want := `
# HELP agentbox_circuit_breaker_state Circuit breaker state per connector: 1 for the current state, 0 for the others.
# TYPE agentbox_circuit_breaker_state gauge
agentbox_circuit_breaker_state{connector="a.two",state="closed"} 1
agentbox_circuit_breaker_state{connector="a.two",state="half-open"} 0
agentbox_circuit_breaker_state{connector="a.two",state="open"} 0
agentbox_circuit_breaker_state{connector="b.one",state="closed"} 0
agentbox_circuit_breaker_state{connector="b.one",state="half-open"} 0
agentbox_circuit_breaker_state{connector="b.one",state="open"} 1
# HELP agentbox_circuit_breaker_rejected_total Calls a connector's open circuit breaker refused (failed fast).
# TYPE agentbox_circuit_breaker_rejected_total counter
agentbox_circuit_breaker_rejected_total{connector="a.two"} 0
agentbox_circuit_breaker_rejected_total{connector="b.one"} 1
`
	if err := testutil.CollectAndCompare(s, strings.NewReader(want), "agentbox_circuit_breaker_state", "agentbox_circuit_breaker_rejected_total"); err != nil {
		t.Error(err)
	}
	if st := s.Statuses(); len(st) != 2 || st[0].Name != "a.two" || st[1].State != Open || st[1].RetryAfter < 59*time.Minute {
		t.Errorf("statuses = %+v", st)
	}
	// New settings: the open breaker is replaced by a closed one.
	s.Configure(Settings{Failures: 2})
	if b := s.Get("b.one"); b.State() != Closed {
		t.Errorf("after Configure: state = %s", b.State())
	}
}
