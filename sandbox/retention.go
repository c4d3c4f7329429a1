package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Retention defaults: every day at 03:00, workspaces unused for 7 days.
const (
	DefaultRetentionSchedule = "0 3 * * *"
	DefaultRetention         = 7 * 24 * time.Hour
)

// Retention prunes stale workspaces on a cron schedule. Prunes never
// overlap: a scheduled run while one is still going is skipped, and RunNow
// waits for the running one. Start and Close may be called once each.
type Retention struct {
	ws        workspacePruner
	schedule  string
	olderThan time.Duration
	log       *slog.Logger
	cron      *cron.Cron

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	run    sync.Mutex // one prune at a time

	mu     sync.Mutex
	closed bool
}

// workspacePruner is what Retention runs on its schedule; *Workspaces is
// the one in use, tests give their own.
type workspacePruner interface {
	Prune(ctx context.Context, opts PruneOptions) (*PruneReport, error)
}

// errRetentionClosed: RunNow after Close.
var errRetentionClosed = errors.New("retention: closed")

// enter registers a prune unless Close has begun.
func (r *Retention) enter() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// NewRetention prunes ws on schedule (standard 5-field cron syntax or a
// descriptor such as "@daily"; "" is DefaultRetentionSchedule), removing
// workspaces unused for olderThan (0 is DefaultRetention). A bad schedule
// is an error saying so. logger may be nil.
func NewRetention(ws *Workspaces, schedule string, olderThan time.Duration, logger *slog.Logger) (*Retention, error) {
	if ws == nil {
		return nil, errors.New("retention: no workspaces")
	}
	return newRetention(ws, schedule, olderThan, logger)
}

func newRetention(ws workspacePruner, schedule string, olderThan time.Duration, logger *slog.Logger) (*Retention, error) {
	if schedule == "" {
		schedule = DefaultRetentionSchedule
	}
	if olderThan == 0 {
		olderThan = DefaultRetention
	}
	if olderThan < 0 {
		return nil, fmt.Errorf("retention: period must be positive, got %s", olderThan)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Retention{ws: ws, schedule: schedule, olderThan: olderThan, log: logger}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.cron = cron.New()
	if _, err := r.cron.AddFunc(schedule, r.scheduled); err != nil {
		return nil, fmt.Errorf("retention: schedule %q (want 5 cron fields like %q or @daily): %w", schedule, DefaultRetentionSchedule, err)
	}
	return r, nil
}

// Start begins the schedule. It does not prune right away.
func (r *Retention) Start() {
	r.log.Info("workspace retention scheduled", "schedule", r.schedule, "older_than", r.olderThan.String())
	r.cron.Start()
}

// Next returns the time of the next scheduled prune (zero before Start).
func (r *Retention) Next() time.Time {
	for _, e := range r.cron.Entries() {
		return e.Next
	}
	return time.Time{}
}

// Close stops the schedule and waits for a running prune to finish; when
// ctx ends first, the prune is cancelled and Close returns ctx's error.
func (r *Retention) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	stopped := r.cron.Stop()
	done := make(chan struct{})
	go func() {
		<-stopped.Done()
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		r.cancel()
		return nil
	case <-ctx.Done():
		r.cancel()
		<-done
		return ctx.Err()
	}
}

// RunNow prunes right away (waiting for a running prune first) and returns
// its report.
func (r *Retention) RunNow(ctx context.Context) (*PruneReport, error) {
	if !r.enter() {
		return nil, errRetentionClosed
	}
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(r.ctx, cancel)
	defer stop()
	r.run.Lock()
	defer r.run.Unlock()
	return r.prune(ctx)
}

func (r *Retention) scheduled() {
	if !r.enter() {
		return
	}
	defer r.wg.Done()
	if !r.run.TryLock() {
		r.log.Warn("workspace retention skipped: the previous prune is still running")
		return
	}
	defer r.run.Unlock()
	_, _ = r.prune(r.ctx)
}

func (r *Retention) prune(ctx context.Context) (*PruneReport, error) {
	rep, err := r.ws.Prune(ctx, PruneOptions{OlderThan: r.olderThan})
	if rep != nil {
		for _, p := range rep.Removed {
			r.log.Info("workspace removed", "user", p.User, "chat", p.Chat, "last_use", p.LastUse, "bytes", p.Bytes)
		}
		r.log.Info("workspace retention done", "removed", len(rep.Removed), "in_use", len(rep.InUse), "kept", rep.Kept,
			"freed_bytes", rep.FreedBytes, "duration_ms", rep.Duration.Milliseconds())
	}
	if err != nil {
		r.log.Error("workspace retention", "error", err)
	}
	return rep, err
}
