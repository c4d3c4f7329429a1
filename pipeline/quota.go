package pipeline

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

// diskQuotas serialise, per user, the decisions that let the user's
// workspaces grow (a new workspace, an upload), so that two at once
// cannot both take the last of a bound, and hold the bytes uploads in
// flight may still write.
type diskQuotas struct {
	mu    sync.Mutex
	users map[string]*userDisk
}

// userDisk is one user's decisions lock and reservations.
type userDisk struct {
	sem      chan struct{} // held while deciding
	reserved int64         // guarded by sem
	refs     int           // guarded by diskQuotas.mu
}

// lock takes user's decisions lock, waiting until ctx ends.
func (q *diskQuotas) lock(ctx context.Context, user string) (*userDisk, func(), error) {
	q.mu.Lock()
	if q.users == nil {
		q.users = map[string]*userDisk{}
	}
	u := q.users[user]
	if u == nil {
		u = &userDisk{sem: make(chan struct{}, 1)}
		q.users[user] = u
	}
	u.refs++
	q.mu.Unlock()
	put := func() {
		q.mu.Lock()
		if u.refs--; u.refs == 0 {
			delete(q.users, user)
		}
		q.mu.Unlock()
	}
	select {
	case u.sem <- struct{}{}:
	case <-ctx.Done():
		put()
		return nil, nil, ctx.Err()
	}
	return u, func() { <-u.sem; put() }, nil
}

// reserve holds n bytes of user's disk for an upload in flight; the
// returned release gives them back.
func (q *diskQuotas) reserve(u *userDisk, user string, n int64) (release func()) {
	u.reserved += n
	q.mu.Lock()
	u.refs++
	q.mu.Unlock()
	return sync.OnceFunc(func() {
		u.sem <- struct{}{}
		u.reserved -= n
		<-u.sem
		q.mu.Lock()
		if u.refs--; u.refs == 0 {
			delete(q.users, user)
		}
		q.mu.Unlock()
	})
}

// diskCap is the bound on what one user's workspaces take
// (limits.disk_per_user, or its share of the data root's disk); 0 when
// the disk's size is unknown.
func (p *Pipeline) diskCap(lim assistant.Limits) int64 {
	if lim.DiskPerUser > 0 {
		return lim.DiskPerUser
	}
	size, err := p.cfg.Workspaces.DiskSize()
	if err != nil {
		p.log.Warn("limits.disk_per_user not applied: the data root's disk size is unknown", "error", err)
		return 0
	}
	return int64(lim.DiskPerUserShare * float64(size))
}

// userRoom measures what user's workspaces and checkpoints take (u's lock held) and
// returns how many bytes more they may take, with the usage; room is -1
// when there is no bound.
func (p *Pipeline) userRoom(ctx context.Context, u *userDisk, user string, lim assistant.Limits) (room int64, usage sandbox.UserUsage, err error) {
	usage, err = p.cfg.Workspaces.UserUsage(ctx, user)
	if err != nil {
		if ctx.Err() != nil {
			return 0, usage, chat.AsError(ctx.Err())
		}
		return 0, usage, &chat.Error{Code: chat.ErrSandbox, Message: "the user's workspaces could not be measured", Err: err}
	}
	if p.cfg.Checkpoints != nil {
		// The chats' checkpoints count against the user's disk too.
		n, err := p.cfg.Checkpoints.UserBytes(ctx, user)
		if err != nil {
			if ctx.Err() != nil {
				return 0, usage, chat.AsError(ctx.Err())
			}
			return 0, usage, &chat.Error{Code: chat.ErrSandbox, Message: "the user's checkpoints could not be measured", Err: err}
		}
		usage.Bytes += n
	}
	limit := p.diskCap(lim)
	if limit <= 0 {
		return -1, usage, nil
	}
	return max(0, limit-usage.Bytes-u.reserved), usage, nil
}

// errDiskPerUser is the refusal of what would take user past
// limits.disk_per_user.
func errDiskPerUser(user string, used, limit int64, what string) *chat.Error {
	return &chat.Error{Code: chat.ErrQuota, Err: errQuota, Message: fmt.Sprintf(
		"user %s's workspaces and checkpoints take %s of the %s this server allows one user (limits.disk_per_user): %s; delete chats or files first",
		user, units.FormatBytes(used), units.FormatBytes(limit), what)}
}

// errQuota is the cause of every quota refusal, for errors.Is.
var errQuota = errors.New("quota exceeded")

// acquireWorkspace acquires the workspace of (user, chatID) with the disk
// limit maxDisk (sandbox.max_disk: a new workspace becomes a disk image
// of that size where the host allows). A workspace it has to create must
// fit the user's bounds, limits.workspaces_per_user and
// limits.disk_per_user, else it is refused with quota_exceeded; existing
// workspaces are always acquired. Errors are *chat.Error.
func (p *Pipeline) acquireWorkspace(ctx context.Context, user, chatID string, maxDisk int64) (*sandbox.Workspace, func(), error) {
	wss := p.cfg.Workspaces
	if !wss.Exists(user, chatID) {
		u, unlock, err := p.quotas.lock(ctx, user)
		if err != nil {
			return nil, nil, chat.AsError(err)
		}
		defer unlock()
		// Checked again under the lock: another request may have made it.
		if !wss.Exists(user, chatID) {
			if err := p.roomForWorkspace(ctx, u, user, limits(p.App())); err != nil {
				return nil, nil, err
			}
		}
	}
	ws, release, err := wss.AcquireWith(ctx, user, chatID, sandbox.AcquireOptions{MaxDisk: maxDisk})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, chat.AsError(ctx.Err())
		}
		return nil, nil, &chat.Error{Code: chat.ErrSandbox, Message: "workspace unavailable: " + err.Error(), Err: err}
	}
	return ws, release, nil
}

// roomForWorkspace refuses a new workspace of user past the user's
// bounds (u's lock held).
func (p *Pipeline) roomForWorkspace(ctx context.Context, u *userDisk, user string, lim assistant.Limits) error {
	room, usage, err := p.userRoom(ctx, u, user, lim)
	if err != nil {
		return err
	}
	if usage.Workspaces >= lim.WorkspacesPerUser {
		p.metrics.rejected("workspaces_per_user")
		return &chat.Error{Code: chat.ErrQuota, Err: errQuota, Message: fmt.Sprintf(
			"user %s has %d workspaces, the most this server allows one user (limits.workspaces_per_user): delete chats (DELETE /api/chats/{chat}) to start new ones",
			user, usage.Workspaces)}
	}
	if room == 0 {
		p.metrics.rejected("disk_per_user")
		return errDiskPerUser(user, usage.Bytes, p.diskCap(lim), "a new chat's workspace does not fit")
	}
	return nil
}
