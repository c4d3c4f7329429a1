package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentbox/agentbox/sandbox"
)

// Runtime is a fake sandbox.Runtime: it checks each Spec as the real
// runtimes do, creates fake Sandboxes over the Spec's workspace running
// Handler, and keeps them so a test can assert what was created and that
// every sandbox was removed. It is safe for concurrent use; set its fields
// before the first Create.
type Runtime struct {
	// Handler runs the commands of every sandbox it creates (nil:
	// sandboxes that run nothing; see Config.Handler).
	Handler Handler
	// CreateErr, when set, fails every Create, as an engine that is down.
	CreateErr error

	mu        sync.Mutex
	sandboxes []*Sandbox
	specs     []sandbox.Spec
}

var _ sandbox.Runtime = (*Runtime)(nil)

// Name returns "fake".
func (r *Runtime) Name() string { return "fake" }

// Close does nothing.
func (r *Runtime) Close(context.Context) error { return nil }

// Create checks spec (a workspace, valid ids, a known network and
// isolation, valid mounts) and returns a fake Sandbox with spec's workspace and env.
func (r *Runtime) Create(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.CreateErr != nil {
		return nil, r.CreateErr
	}
	if spec.Workspace == nil {
		return nil, errors.New("fake create: spec has no workspace")
	}
	if err := sandbox.ValidateID("user", spec.UserID); err != nil {
		return nil, fmt.Errorf("fake create: %w", err)
	}
	if err := sandbox.ValidateID("chat", spec.ChatID); err != nil {
		return nil, fmt.Errorf("fake create: %w", err)
	}
	if n := spec.Network; n != "" && n != sandbox.NetworkNone && n != sandbox.NetworkHost {
		return nil, fmt.Errorf("fake create: network %q: want %q or %q", n, sandbox.NetworkNone, sandbox.NetworkHost)
	}
	if _, err := sandbox.CheckIsolation(r.Name(), spec.Isolation, sandbox.Isolations()...); err != nil {
		return nil, fmt.Errorf("fake create: %w", err)
	}
	if _, err := sandbox.CheckMounts(spec.Mounts); err != nil {
		return nil, fmt.Errorf("fake create: %w", err)
	}
	if _, err := sandbox.MergeEnv(spec.Env); err != nil {
		return nil, fmt.Errorf("fake create: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := NewSandbox(Config{ID: fmt.Sprintf("fake-%d", len(r.sandboxes)+1), Workspace: spec.Workspace, Env: spec.Env, Handler: r.Handler})
	r.sandboxes = append(r.sandboxes, sb)
	r.specs = append(r.specs, spec)
	return sb, nil
}

// Created counts the sandboxes created.
func (r *Runtime) Created() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sandboxes)
}

// Live counts the sandboxes created and not removed.
func (r *Runtime) Live() int {
	n := 0
	for _, sb := range r.Sandboxes() {
		if !sb.Removed() {
			n++
		}
	}
	return n
}

// Sandboxes returns the sandboxes created, in order.
func (r *Runtime) Sandboxes() []*Sandbox {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Sandbox(nil), r.sandboxes...)
}

// Specs returns the specs of the sandboxes created, in order.
func (r *Runtime) Specs() []sandbox.Spec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sandbox.Spec(nil), r.specs...)
}
