package connector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbox/agentbox/breaker"
	"github.com/agentbox/agentbox/chat"
)

// TestBreakerFailsFast: every attempt counts with the connector's breaker;
// once it opens, calls fail at once, without a request, with
// circuit_open; after the cooldown one probe goes through and a good
// answer closes it. Errors about the request do not open it.
func TestBreakerFailsFast(t *testing.T) {
	t.Parallel()
	ok := reply{events: concat(oaText("fine"), oaFinish("stop"), "[DONE]")}
	f := newFake(t, reply{status: 502}, reply{status: 503}, reply{status: 500}, reply{status: 500}, ok)
	set := breaker.NewSet(breaker.Settings{Failures: 3, Cooldown: 100 * time.Millisecond}, nil)
	c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) {
		c.Retry.MaxAttempts = 2
		c.Breaker = set.Get("openai.gpt")
	})
	stream := func() error {
		_, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, nil)
		return err
	}
	// Call 1: two failed attempts. Call 2: a third failure opens the
	// breaker, so its retry is refused.
	if err := stream(); err == nil {
		t.Fatal("call 1 succeeded")
	}
	err := stream()
	var ce *chat.Error
	if !errors.As(err, &ce) || ce.Code != chat.ErrCircuitOpen || ce.RetryAfter <= 0 {
		t.Fatalf("call 2: err = %v, want circuit_open with RetryAfter", err)
	}
	if n := len(f.requests()); n != 3 {
		t.Fatalf("%d requests, want 3 (the breaker stops the retry)", n)
	}
	start := time.Now()
	if err := stream(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("call 3: err = %v, want the open breaker's", err)
	}
	// No request and no retry's backoff: well under a second even on a
	// loaded machine, where 50ms is one scheduling hiccup.
	if took := time.Since(start); took > time.Second || len(f.requests()) != 3 {
		t.Errorf("open breaker: took %s and %d requests; want at once and none", took, len(f.requests())-3)
	}
	// After the cooldown: a failed probe opens it again, the next probe
	// succeeds and closes it.
	time.Sleep(120 * time.Millisecond)
	if err := stream(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("failed probe: err = %v, want the probe's failure then the open breaker", err)
	}
	time.Sleep(120 * time.Millisecond)
	if err := stream(); err != nil {
		t.Fatalf("good probe: %v", err)
	}
	if st := set.Get("openai.gpt").State(); st != breaker.Closed {
		t.Errorf("state after a good probe = %s", st)
	}
}

// TestBreakerIgnoresRequestErrors: a bad key or a bad request is the
// caller's problem, a rate limit the account's: none opens the breaker.
func TestBreakerIgnoresRequestErrors(t *testing.T) {
	t.Parallel()
	f := newFake(t, reply{status: 401}, reply{status: 400}, reply{status: 429, body: `{"error":{"type":"insufficient_quota","message":"quota"}}`}, reply{status: 404})
	b := breaker.NewSet(breaker.Settings{Failures: 1, Cooldown: time.Hour}, nil).Get("c")
	c, _ := newTestClient(t, TypeOpenAI, f, func(c *Config) { c.Breaker = b })
	for range 4 {
		if _, err := c.Stream(context.Background(), &Request{Messages: userMsg("hi")}, nil); errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("breaker opened on %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = c.Stream(ctx, &Request{Messages: userMsg("hi")}, nil)
	if b.State() != breaker.Closed {
		t.Errorf("state = %s, want closed", b.State())
	}
}
