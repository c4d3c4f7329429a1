package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentbox/agentbox/sandbox"
)

// ReapOptions tunes Reap.
type ReapOptions struct {
	// DryRun reports without deleting.
	DryRun bool
	// Grace is how old a pod of another instance must be before it counts
	// as orphaned (0: DefaultReapGrace).
	Grace time.Duration
}

// trackedSet is the set of pods that live sandboxes own: the reaper never
// deletes one of them, whatever its labels say. The runtime's tracker is
// the one in use; tests give a set of their own.
type trackedSet interface {
	has(name string) bool
}

// reapEngine is the API server as the reaper uses it; the Runtime is the
// one in use.
type reapEngine interface {
	// labelled lists the pods in the namespace that carry our product
	// label.
	labelled(ctx context.Context) ([]corev1.Pod, error)
	// reapPod deletes a pod with its grace period, without waiting;
	// NotFound counts as done.
	reapPod(ctx context.Context, pod *corev1.Pod) error
}

// reaper deletes dangling sandbox pods by the same rule as the Docker
// reaper (sandbox.Orphaned): ours by label, not owned by a live sandbox of
// this runtime, and made by this run, by a process that is gone, or by
// another instance longer ago than a grace period. It holds no state of
// its own between runs.
type reaper struct {
	engine  reapEngine
	tracked trackedSet
	run     string
	alive   func(run string) bool
	now     func() time.Time
	log     *slog.Logger
	// leases says, per run that keeps a lease, whether it expired (nil:
	// no leases; lease.go).
	leases func(ctx context.Context) (map[string]bool, error)
	// sweep removes what dead processes left on this host beside their
	// pods (pool slots; nil: nothing).
	sweep func()
}

// Reap deletes our labelled pods that no live request owns: pods of this
// runtime it does not track (a failed cleanup), pods whose owning process
// is gone (a crashed server on this host), and pods of other instances
// older than opts.Grace (default DefaultReapGrace). With DryRun it only
// reports. It returns the names of the pods deleted (or that would be),
// sorted.
func (r *Runtime) Reap(ctx context.Context, opts ReapOptions) ([]string, error) {
	return r.reaper.reap(ctx, opts)
}

// StartReaper reaps now and then every interval (0: one minute) until
// Close, logging what it deleted.
func (r *Runtime) StartReaper(interval time.Duration) {
	if interval <= 0 {
		interval = time.Minute
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.reaper.loop(r.ctx, interval)
	}()
}

func (rp *reaper) reap(ctx context.Context, opts ReapOptions) ([]string, error) {
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultReapGrace
	}
	if rp.sweep != nil && !opts.DryRun {
		rp.sweep()
	}
	list, err := rp.engine.labelled(ctx)
	if err != nil {
		return nil, err
	}
	now := rp.now()
	alive := rp.alive
	if rp.leases != nil {
		expired, err := rp.leases(ctx)
		if err != nil {
			rp.log.Debug("sandbox reaper: leases unreadable; runs of other hosts wait for the grace period", "error", err)
		} else {
			// Dead when either says so: a fresh lease of a process this
			// host knows is gone (killed before its lease expired)
			// proves nothing.
			alive = func(run string) bool { return !expired[run] && rp.alive(run) }
		}
	}
	var reaped []string
	var errs []error
	for i := range list {
		pod := &list[i]
		if pod.DeletionTimestamp != nil || rp.tracked.has(pod.Name) {
			continue
		}
		created := pod.CreationTimestamp.Time
		if t, err := time.Parse(time.RFC3339, pod.Annotations[sandbox.LabelCreated]); err == nil && t.Before(created) {
			created = t
		}
		o := sandbox.Owner{Instance: pod.Annotations[sandbox.LabelInstance], Run: pod.Annotations[sandbox.LabelRun], Created: created}
		reason, dangling := sandbox.Orphaned(o, rp.run, now, grace, alive)
		if !dangling {
			continue
		}
		if !opts.DryRun {
			if err := rp.engine.reapPod(ctx, pod); err != nil {
				errs = append(errs, fmt.Errorf("reap %s: %w", pod.Name, err))
				continue
			}
		}
		rp.log.Info("sandbox pod reaped", "pod", pod.Name, "namespace", pod.Namespace, "reason", reason, "dry_run", opts.DryRun,
			"user", pod.Annotations[sandbox.LabelUser], "chat", pod.Annotations[sandbox.LabelChat])
		reaped = append(reaped, pod.Name)
	}
	sort.Strings(reaped)
	return reaped, errors.Join(errs...)
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

// labelled lists every pod in the namespace with our product label
// (reapEngine).
func (r *Runtime) labelled(ctx context.Context) ([]corev1.Pod, error) {
	lctx, cancel := r.call(ctx)
	defer cancel()
	list, err := r.api.list(lctx, metav1.ListOptions{LabelSelector: productSelector()})
	if err != nil {
		return nil, r.apiErr(ctx, "reap: list", err)
	}
	return list.Items, nil
}

// reapPod deletes pod with the grace period (reapEngine): its owner is
// gone, so there is no hurry to wait for.
func (r *Runtime) reapPod(ctx context.Context, pod *corev1.Pod) error {
	dctx, cancel := r.call(ctx)
	defer cancel()
	grace := int64(r.opts.GracePeriod.Round(time.Second) / time.Second)
	uid := types.UID(pod.UID)
	err := r.api.delete(dctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return r.apiErr(ctx, "reap: delete", err)
}
