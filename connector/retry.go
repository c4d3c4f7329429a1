package connector

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// RetryPolicy bounds the retries of a failed request. Only failures before
// any output was emitted are retried (see the package doc). Zero fields take
// the defaults.
type RetryPolicy struct {
	// MaxAttempts is the number of requests, the first included (default
	// 3; 1 disables retries).
	MaxAttempts int
	// BaseDelay is the wait before the first retry (default 500ms); each
	// further retry doubles it, with jitter.
	BaseDelay time.Duration
	// MaxDelay caps one backoff wait (default 8s). A longer Retry-After from
	// the provider is honoured, within MaxElapsed.
	MaxDelay time.Duration
	// MaxElapsed is the time after the call started beyond which no retry
	// begins (default 60s).
	MaxElapsed time.Duration
}

// Retry defaults.
const (
	DefaultMaxAttempts = 3
	DefaultBaseDelay   = 500 * time.Millisecond
	DefaultMaxDelay    = 8 * time.Second
	DefaultMaxElapsed  = 60 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = DefaultMaxElapsed
	}
	return p
}

// delay returns the wait after the failed attempt number attempt (1-based):
// BaseDelay doubled per attempt, capped at MaxDelay, with "equal jitter"
// (a random point in the upper half) so clients that failed together do not
// retry together; at least retryAfter when the provider asked for it.
func (p RetryPolicy) delay(attempt int, retryAfter time.Duration) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	if half := d / 2; half > 0 {
		d = half + rand.N(half+1)
	}
	return max(d, retryAfter)
}

// sleep waits d or until ctx ends, returning ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchdog cancels an attempt when no output arrives within the first-byte
// timeout, or when output stops for the idle timeout once it started.
type watchdog struct {
	t       *time.Timer
	idle    time.Duration
	started atomic.Bool
}

func startWatchdog(first, idle time.Duration, cancel context.CancelCauseFunc) *watchdog {
	w := &watchdog{idle: idle}
	w.t = time.AfterFunc(first, func() {
		if w.started.Load() {
			cancel(errIdle)
		} else {
			cancel(errFirstByte)
		}
	})
	return w
}

// kick records progress: the first-byte timeout no longer applies and the
// idle timeout restarts.
func (w *watchdog) kick() {
	w.started.Store(true)
	w.t.Reset(w.idle)
}

func (w *watchdog) stop() { w.t.Stop() }
