package sandbox

import (
	"context"
	"errors"
)

// A warm pool keeps sandboxes created ahead of demand, so that a chat's
// first turn does not wait for a container to start: a runtime that
// implements Pooler creates a sandbox without a workspace, user or chat
// (Prestart), hardened exactly as Create would, and a chat later claims
// it (Pooled.Claim), which attaches the chat's workspace, its mounts and
// its environment to the running sandbox. A pooled sandbox serves one
// chat: it is never returned to the pool, so nothing of one chat reaches
// another.

// ErrNotPoolable: a spec asks for what a pooled sandbox cannot be given
// after it started (a mount it was not made with, an isolation whose
// kernel sees no mounts made later, a host where the runtime may not
// mount). The caller creates the sandbox the usual way.
var ErrNotPoolable = errors.New("not poolable")

// Pooler is a runtime that can create sandboxes ahead of demand.
type Pooler interface {
	// Prestart creates a sandbox for spec's image, limits, network,
	// isolation and Mounts (its Workspace, Env and Hide are ignored:
	// Claim gives them; a runtime may label the sandbox with UserID and
	// ChatID when set, for the chat that will claim it). The caller must
	// Remove or Claim it.
	Prestart(ctx context.Context, spec Spec) (Pooled, error)
}

// Pooled is a sandbox created ahead of demand. Methods are safe for
// concurrent use, but a Pooled is claimed at most once.
type Pooled interface {
	// ID identifies the sandbox on its runtime.
	ID() string
	// Claim checks that the sandbox is still as it was made (running,
	// never claimed) and attaches spec's workspace, hidden names,
	// environment and mounts (those of the Prestart spec, and sockets under
	// the folder PoolSocketDir names). On success the returned Sandbox is
	// the chat's, and the Pooled is spent; on failure the caller Removes
	// it. A spec it cannot serve is ErrNotPoolable.
	Claim(ctx context.Context, spec Spec) (Sandbox, error)
	// Remove removes an unclaimed sandbox. Idempotent.
	Remove(ctx context.Context) error
}

// Unclaimed is a Pooled sandbox that runs commands before a chat claims
// it: a warm pool starts the assistant's CLI in it ahead of the chat
// (executor.Primer). Before the claim its /workspace is a folder of its
// own, empty when it was made; Claim empties that folder and covers it
// with the chat's workspace. A process started before the claim lives on
// after it, in the chat's sandbox; its working folder stays the emptied
// one, and it reaches the chat's files by absolute /workspace paths,
// resolved anew.
type Unclaimed interface {
	Pooled
	// Unclaimed returns the sandbox as it runs before its claim, with env
	// as its environment (the chat's sandbox's environment, as Claim will
	// set it): its Start and Exec run commands, its Workspace is the
	// sandbox's own folder. It serves until Claim or Remove; its Remove
	// does nothing (the Pooled's removes the sandbox).
	Unclaimed(env map[string]string) (Sandbox, error)
}

// PoolSocketDir is the folder of a sandbox whose sockets a pooled sandbox
// takes at Claim, whatever their host path: the bridge's sockets and its
// egress CA (bridge.GuestModelSocket and the others are in it).
const PoolSocketDir = "/run/agentbox"

// Freezer is a sandbox that can be frozen: every process in it stopped
// (the cgroup freezer), so that it costs no CPU while it waits, and
// thawed as it was. A frozen sandbox runs no command; its owner thaws it
// before it runs one, stops its processes or removes it (Remove also
// works on a frozen sandbox).
type Freezer interface {
	Freeze(ctx context.Context) error
	Thaw(ctx context.Context) error
}
