package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/agentbox/agentbox/sandbox"
)

// Sandbox is one live pod. It is safe for concurrent use.
type Sandbox struct {
	rt   *Runtime
	name string
	uid  string
	ws   *sandbox.Workspace
	env  map[string]string

	procs sandbox.Procs

	// release gives back what the sandbox holds beside its pod once that
	// is deleted (a claimed pooled pod's slot; nil: none).
	release func() error
	// unclaimed: a pooled pod before its claim (Pooled.Unclaimed), which
	// the Pooled removes.
	unclaimed bool

	mu      sync.Mutex
	removed bool
	deleted bool // the pod is gone: Remove is done
	terms   map[*terminal]struct{}
}

var _ sandbox.Sandbox = (*Sandbox)(nil)

// ID returns the pod's name.
func (s *Sandbox) ID() string { return s.name }

// Namespace returns the pod's namespace.
func (s *Sandbox) Namespace() string { return s.rt.opts.Namespace }

// Workspace returns the mounted workspace.
func (s *Sandbox) Workspace() *sandbox.Workspace { return s.ws }

func (s *Sandbox) isRemoved() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removed
}

// Remove kills every process and deletes the pod. Idempotent: a pod
// already gone counts as removed; after a failure a second Remove tries
// again, and the reaper deletes the pod within its next pass. It runs with its own timeouts even when
// ctx has ended (request cancelled), so cleanup always happens.
//
// The processes are killed through one exec (`kill -KILL -1` as the
// sandbox user, which spares the pause process, pid 1), and the pod is then
// deleted without a grace period: nothing of the sandbox runs any more, so
// the object goes at once rather than after the kubelet's next status
// sync (~1-4 s). When that exec cannot run (the pod is not running, the
// kubelet does not answer), the pod is deleted with its grace period and
// Remove waits until it is gone.
func (s *Sandbox) Remove(ctx context.Context) error {
	if s.unclaimed {
		return nil
	}
	s.mu.Lock()
	s.removed = true
	done := s.deleted
	terms := make([]*terminal, 0, len(s.terms))
	for t := range s.terms {
		terms = append(terms, t)
	}
	s.mu.Unlock()
	if done {
		return nil
	}
	r := s.rt
	err := r.deletePod(ctx, s.name, s.uid, !r.pods.isGone(s.name))
	if err == nil {
		s.mu.Lock()
		s.deleted = true
		s.mu.Unlock()
	}
	if s.release != nil {
		// Even when the deletion failed: the workspace's mounts leave
		// whatever is left of the pod.
		err = errors.Join(err, s.release())
	}
	// Untracked even when the deletion failed: nothing uses the sandbox
	// any more, so the reaper's next pass deletes what is left.
	r.tracked.drop(s.name)
	r.pods.forget(s.name)
	// The streams end with the pod; make sure.
	for _, p := range s.procs.All() {
		p.Cut()
	}
	for _, t := range terms {
		t.cut()
	}
	return err
}

// killAllScript kills every process the sandbox user has in the pod: kill(2)
// with pid -1 spares pid 1 (the pause process) and the caller.
const killAllScript = `kill -KILL -1 2>/dev/null; exit 0`

// deletePod deletes a pod (uid, when set, guards against deleting another
// pod of the same name); NotFound counts as done. With kill, the pod's
// processes are killed first through an exec and the pod is deleted at
// once; otherwise, or when that fails, it is deleted with the grace period
// and deletePod waits until it is gone. It runs with its own timeouts even
// when ctx has already ended.
func (r *Runtime) deletePod(ctx context.Context, name, uid string, kill bool) error {
	ctx = context.WithoutCancel(ctx)
	grace := int64(r.opts.GracePeriod.Round(time.Second) / time.Second)
	if kill {
		kctx, cancel := context.WithTimeout(ctx, min(r.opts.CallTimeout, 5*time.Second))
		if _, err := r.run1(kctx, name, []string{sandbox.Shell, "-c", killAllScript}, nil); err == nil {
			grace = 0
		}
		cancel()
	}
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if uid != "" {
		u := types.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	dctx, cancel := r.call(ctx)
	err := r.api.delete(dctx, name, opts)
	cancel()
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err) && uid != "":
		return nil // the precondition failed: our pod is gone, another has its name
	case err != nil:
		return r.apiErr(ctx, "delete", err)
	case grace == 0:
		return nil
	}
	// Wait for the kubelet to stop the containers and the object to go.
	wctx, cancel := context.WithTimeout(ctx, r.opts.GracePeriod+r.opts.CallTimeout)
	defer cancel()
	for {
		gctx, gcancel := r.call(wctx)
		pod, err := r.api.get(gctx, name)
		gcancel()
		switch {
		case apierrors.IsNotFound(err), err == nil && uid != "" && string(pod.UID) != uid:
			return nil
		case wctx.Err() != nil:
			return fmt.Errorf("kubernetes delete: pod %s still there %s after its deletion: %w", name, r.opts.GracePeriod+r.opts.CallTimeout, sandbox.ErrEngineUnavailable)
		}
		select {
		case <-wctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// tracker is the set of pod names of live sandboxes, which the reaper
// never deletes. It is safe for concurrent use.
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
