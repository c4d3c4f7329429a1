package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/units"
	"github.com/agentbox/agentbox/sandbox"
)

// UploadRequest is a file a user puts into a chat's workspace.
type UploadRequest struct {
	// UserID owns the chat; ChatID names it. Both are validated.
	UserID, ChatID string
	// Path is the file's path in the workspace (relative, or absolute
	// under /workspace), confined to it as every file operation is.
	Path string
	// Body is the file's content. Size is its length when the client said
	// (-1: unknown); Limit is the most Body yields (the caller bounds it,
	// and its error is returned when it is over).
	Body        io.Reader
	Size, Limit int64
}

// Uploaded is the file an upload wrote, as the workspace has it.
type Uploaded struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	// Created: the file is new (else it replaced one).
	Created bool `json:"created"`
}

// uploadWait is how long an upload waits for one of the server's upload
// slots (limits.uploads).
const uploadWait = time.Minute

// ErrIsFolder is the cause of an upload's error when its path names a
// folder of the workspace.
var ErrIsFolder = errors.New("is a folder")

// Upload streams req.Body into the file req.Path of the chat's workspace
// (created with its folders, or replaced atomically), holding a few
// hundred KiB of it at a time. A chat without a workspace gets one made as
// its first turn's would be: with its assistant's disk limit
// (sandbox.max_disk; the app's default for a chat without one yet), and
// within the user's bounds (limits.workspaces_per_user,
// limits.disk_per_user). The file must fit in both the workspace and the
// user's bound; uploads in flight count at their full size. Errors are
// *chat.Error: too_many_uploads past limits.uploads_per_user, server_busy
// when none of limits.uploads became free in time, quota_exceeded for a
// file that does not fit; a path naming a folder wraps ErrIsFolder, one
// outside the workspace sandbox.ErrPathOutside; Body's own errors are
// returned wrapped, as they are.
func (p *Pipeline) Upload(ctx context.Context, req UploadRequest) (*Uploaded, error) {
	if p.cfg.Workspaces == nil {
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Message: "this server has no workspaces", Err: sandbox.ErrNotFound}
	}
	if err := validateIDs(req.UserID, req.ChatID); err != nil {
		return nil, err
	}
	rel, err := sandbox.Rel(req.Path)
	if err != nil || rel == "." {
		return nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: sandbox.ErrPathOutside,
			Message: fmt.Sprintf("path %q is not a file in the chat's workspace", req.Path)}
	}
	app := p.App()
	lim := limits(app)
	releaseUser, ok := p.uploaders.acquire(req.UserID, lim.UploadsPerUser)
	if !ok {
		p.metrics.rejected("uploads_per_user")
		return nil, &chat.Error{Code: chat.ErrTooManyUploads, RetryAfter: time.Second,
			Message: fmt.Sprintf("user %s already sends %d uploads at once, the most this server allows (limits.uploads_per_user); send the next when one is done", req.UserID, lim.UploadsPerUser)}
	}
	defer releaseUser()
	releaseSlot, err := p.uploadSlots.acquire(ctx, lim.Uploads, uploadWait)
	if err != nil {
		if ctx.Err() != nil {
			return nil, chat.AsError(ctx.Err())
		}
		p.metrics.rejected("uploads")
		return nil, &chat.Error{Code: chat.ErrServerBusy, RetryAfter: retryAfter, Err: err,
			Message: fmt.Sprintf("the server takes %d uploads at once (limits.uploads) and none ended within %s; retry later", lim.Uploads, uploadWait)}
	}
	defer releaseSlot()

	ws, release, err := p.acquireWorkspace(ctx, req.UserID, req.ChatID, p.uploadDisk(ctx, app, req))
	if err != nil {
		return nil, err
	}
	defer release()
	created := true
	if st, err := ws.Stat(ctx, rel); err == nil {
		if st.IsDir {
			return nil, &chat.Error{Code: chat.ErrInvalidRequest, Err: ErrIsFolder, Message: fmt.Sprintf("path %q is a folder of the workspace", req.Path)}
		}
		created = false
	}
	body, unreserve, err := p.boundUpload(ctx, ws, req, lim)
	if err != nil {
		return nil, err
	}
	defer unreserve()
	n, err := ws.WriteFrom(ctx, rel, body, 0o644)
	if err != nil {
		var qe *quotaError
		if errors.As(err, &qe) {
			if qe.limit != "" {
				p.metrics.rejected(qe.limit)
			}
			return nil, qe.err
		}
		return nil, err
	}
	st, err := ws.Stat(ctx, rel)
	if err != nil {
		return nil, err
	}
	p.log.Info("file uploaded", "user", req.UserID, "chat", req.ChatID, "path", rel, "bytes", n)
	return &Uploaded{Path: rel, Size: st.Size, ModTime: st.ModTime, Created: created}, nil
}

// uploadDisk is the disk limit the chat's workspace gets: its assistant's
// sandbox.max_disk, else the app's.
func (p *Pipeline) uploadDisk(ctx context.Context, app *assistant.App, req UploadRequest) int64 {
	if cs, ok := p.chatStore(); ok {
		if info, found, err := cs.Chat(ctx, req.UserID, req.ChatID); err == nil && found {
			if a := app.Assistants[info.AssistantID]; a != nil && a.Sandbox != nil && a.Sandbox.DiskBytes > 0 {
				return a.Sandbox.DiskBytes
			}
		}
	}
	if app.Config != nil && app.Config.Sandbox.DiskBytes > 0 {
		return app.Config.Sandbox.DiskBytes
	}
	return assistant.DefaultDisk
}

// boundUpload reserves what the upload may write of the user's disk and
// returns its body bounded by that and by the workspace's room: a file
// that says its size and does not fit is refused before a byte is read,
// one that does not say it is cut off where it stops fitting.
func (p *Pipeline) boundUpload(ctx context.Context, ws *sandbox.Workspace, req UploadRequest, lim assistant.Limits) (io.Reader, func(), error) {
	want := req.Limit
	if req.Size >= 0 {
		want = req.Size
	}
	wsRoom, limited, err := ws.Room(ctx)
	if err != nil {
		return nil, nil, &chat.Error{Code: chat.ErrSandbox, Message: "the chat's workspace could not be measured", Err: err}
	}
	wsFull := &chat.Error{Code: chat.ErrQuota, Err: errQuota, Message: fmt.Sprintf(
		"the file does not fit in the chat's workspace: %s are free under its disk limit (sandbox.max_disk); delete files first", units.FormatBytes(wsRoom))}
	if limited && req.Size > wsRoom {
		return nil, nil, wsFull
	}
	u, unlock, err := p.quotas.lock(ctx, req.UserID)
	if err != nil {
		return nil, nil, chat.AsError(err)
	}
	defer unlock()
	room, usage, err := p.userRoom(ctx, u, req.UserID, lim)
	if err != nil {
		return nil, nil, err
	}
	var body io.Reader = req.Body
	if room >= 0 {
		userFull := errDiskPerUser(req.UserID, usage.Bytes, p.diskCap(lim), fmt.Sprintf("the file does not fit in the %s left", units.FormatBytes(room)))
		if req.Size > room || req.Size < 0 && room == 0 {
			p.metrics.rejected("disk_per_user")
			return nil, nil, userFull
		}
		want = min(want, room)
		body = &quotaReader{r: body, n: room, err: &quotaError{userFull, "disk_per_user"}}
	}
	if limited && wsRoom >= 0 {
		body = &quotaReader{r: body, n: wsRoom, err: &quotaError{err: wsFull}}
	}
	return body, p.quotas.reserve(u, req.UserID, max(want, 0)), nil
}

// quotaReader yields at most n bytes of r; one more is err.
type quotaReader struct {
	r   io.Reader
	n   int64
	err *quotaError
}

// quotaError carries a quota refusal through the workspace's write, with
// the limit it counts against in the metrics ("" for none).
type quotaError struct {
	err   *chat.Error
	limit string
}

func (e *quotaError) Error() string { return e.err.Error() }
func (e *quotaError) Unwrap() error { return e.err }

func (q *quotaReader) Read(b []byte) (int, error) {
	if int64(len(b)) > q.n+1 {
		b = b[:q.n+1]
	}
	n, err := q.r.Read(b)
	if int64(n) > q.n {
		return int(q.n), q.err
	}
	q.n -= int64(n)
	return n, err
}
