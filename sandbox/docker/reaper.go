package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/agentbox/agentbox/sandbox"
)

// ReapOptions tunes Reap.
type ReapOptions struct {
	// DryRun reports without removing.
	DryRun bool
	// Grace is how old a container of another instance must be before it
	// counts as orphaned (0: DefaultReapGrace).
	Grace time.Duration
}

// trackedSet is the set of containers that live sandboxes own: the reaper
// never removes one of them, whatever its labels say. The runtime's tracker
// is the one in use; tests give a set of their own.
type trackedSet interface {
	// has reports whether the container called name belongs to a live
	// sandbox of this runtime.
	has(name string) bool
}

// tracker is the runtime's trackedSet: the names of the containers it
// created and has not removed. It is safe for concurrent use.
type tracker struct {
	mu    sync.Mutex
	names map[string]struct{}
}

func newTracker() *tracker { return &tracker{names: map[string]struct{}{}} }

func (t *tracker) add(name string) {
	t.mu.Lock()
	t.names[name] = struct{}{}
	t.mu.Unlock()
}

func (t *tracker) drop(name string) {
	t.mu.Lock()
	delete(t.names, name)
	t.mu.Unlock()
}

func (t *tracker) has(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.names[name]
	return ok
}

// reapEngine is the engine as the reaper uses it; the Runtime is the one in
// use.
type reapEngine interface {
	// labelled lists the containers that carry our product label, running
	// or not.
	labelled(ctx context.Context) ([]container.Summary, error)
	// remove force-removes a container; NotFound counts as done.
	remove(ctx context.Context, id string) error
}

// reaper removes dangling containers (nomad's reconcile_dangling): ours by
// label, not owned by a live sandbox (the tracked set), and either made by
// this run, or by a process that is gone, or by another instance longer
// ago than a grace period. It holds no state of its own between runs.
type reaper struct {
	engine  reapEngine
	tracked trackedSet
	// run is the run id of the runtime it reaps for.
	run string
	// alive reports whether the process behind a run id may still run
	// (sandbox.RunAlive).
	alive func(run string) bool
	now   func() time.Time
	log   *slog.Logger
}

// reap removes (with opts.DryRun: only reports) the dangling containers
// and returns their names, sorted. A container it cannot remove does not
// stop it: the errors are joined.
func (rp *reaper) reap(ctx context.Context, opts ReapOptions) ([]string, error) {
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultReapGrace
	}
	list, err := rp.engine.labelled(ctx)
	if err != nil {
		return nil, err
	}
	now := rp.now()
	var reaped []string
	var errs []error
	for _, c := range list {
		name := containerName(c)
		reason, ok := rp.verdict(c, name, now, grace)
		if !ok {
			continue
		}
		if !opts.DryRun {
			if err := rp.engine.remove(ctx, c.ID); err != nil {
				errs = append(errs, fmt.Errorf("reap %s: %w", name, err))
				continue
			}
		}
		rp.log.Info("sandbox container reaped", "container", name, "reason", reason, "dry_run", opts.DryRun,
			"user", c.Labels[sandbox.LabelUser], "chat", c.Labels[sandbox.LabelChat])
		reaped = append(reaped, name)
	}
	sort.Strings(reaped)
	return reaped, errors.Join(errs...)
}

// verdict says whether container c (called name) is dangling, and why.
func (rp *reaper) verdict(c container.Summary, name string, now time.Time, grace time.Duration) (reason string, dangling bool) {
	if rp.tracked.has(name) {
		return "", false
	}
	created := time.Unix(c.Created, 0)
	if t, err := time.Parse(time.RFC3339, c.Labels[sandbox.LabelCreated]); err == nil && t.Before(created) {
		created = t
	}
	o := sandbox.Owner{Instance: c.Labels[sandbox.LabelInstance], Run: c.Labels[LabelRun], Created: created}
	return sandbox.Orphaned(o, rp.run, now, grace, rp.alive)
}

// loop reaps now and then every interval until ctx ends, logging failures.
func (rp *reaper) loop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := rp.reap(ctx, ReapOptions{}); err != nil && ctx.Err() == nil {
			rp.log.Error("sandbox reaper", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// containerName is a listed container's name without its leading slash,
// or its id when it has none.
func containerName(c container.Summary) string {
	if len(c.Names) > 0 {
		return strings.TrimPrefix(c.Names[0], "/")
	}
	return c.ID
}
