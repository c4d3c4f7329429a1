package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/sandbox"
)

// DefaultUploadLimit bounds one uploaded file (Config.UploadLimit).
const DefaultUploadLimit = 64 << 20

// uploadReadTimeout bounds how long a client may take to send a file.
const uploadReadTimeout = 5 * time.Minute

// upload is PUT /api/chats/{chat}/files?path=P: the request body becomes
// the file P of the chat's workspace (created with its folders, or
// replaced), streamed to disk through the workspace's confined file
// operations (pipeline's Upload): a path that leaves the workspace, also
// through a symlink, is a 400, a folder at P a 409, a body over the limit
// a 413, a file over the workspace's or the user's disk bounds a 507.
func (s *Server) upload(w http.ResponseWriter, r *http.Request, user string) {
	cs, err := s.chats()
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	chatID, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	p := r.URL.Query().Get("path")
	if p == "" {
		writeError(w, s.log, badRequest("path is missing: PUT /api/chats/%s/files?path=folder/name with the file as the body", chatID))
		return
	}
	rel, err := sandbox.Rel(p)
	if err != nil {
		writeError(w, s.log, badRequest("path %q is outside the chat's workspace", p))
		return
	}
	if rel == "." || strings.HasSuffix(p, "/") {
		writeError(w, s.log, badRequest("path %q names a folder: give the file's name", p))
		return
	}
	if strings.HasPrefix(path.Base(rel), ".") && strings.Contains(path.Base(rel), ".tmp-") {
		writeError(w, s.log, badRequest("path %q looks like a temporary file of the workspace: choose another name", p))
		return
	}
	limit := s.cfg.UploadLimit
	if r.ContentLength > limit {
		writeError(w, s.log, chat.Errorf(CodeBodyTooLarge, "the file is %d bytes, over the upload limit of %d bytes", r.ContentLength, limit))
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(uploadReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	up, err := cs.Upload(r.Context(), pipeline.UploadRequest{UserID: user, ChatID: chatID, Path: rel,
		Body: bodyReader{http.MaxBytesReader(w, r.Body, limit)}, Size: r.ContentLength, Limit: limit})
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			err = chat.Errorf(CodeBodyTooLarge, "the file is over the upload limit of %d bytes", limit)
		case errors.Is(err, pipeline.ErrIsFolder):
			err = errorf(http.StatusConflict, chat.ErrInvalidRequest, "path %q is a folder of the workspace", p)
		case errors.Is(err, errBodyRead):
			err = badRequest("read the file: %v", err)
		default:
			err = fileError(p, err)
		}
		writeError(w, s.log, err)
		return
	}
	status := http.StatusOK
	if up.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, up)
}

// errBodyRead marks the errors of reading a request's body (the client
// went away, or was too slow), so that they are told apart from the
// workspace's.
var errBodyRead = errors.New("request body")

// bodyReader marks its reader's errors with errBodyRead.
type bodyReader struct{ r io.Reader }

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", errBodyRead, err)
	}
	return n, err
}

// zipFolder streams the folder rel as a zip archive. An error before the
// first byte is a JSON error; after it, the connection is cut so the
// client never takes a broken archive for a whole one.
func (s *Server) zipFolder(w http.ResponseWriter, r *http.Request, ws *sandbox.Workspace, chatID, rel string) {
	st, err := ws.Stat(r.Context(), rel)
	if err != nil {
		writeError(w, s.log, fileError(rel, err))
		return
	}
	if !st.IsDir {
		writeError(w, s.log, badRequest("path %q is a file: format=zip takes a folder", rel))
		return
	}
	name := chatID
	if rel != "." {
		name += "-" + strings.ReplaceAll(rel, "/", "-")
	}
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Content-Disposition", attachment(name+".zip"))
	h.Set("Cache-Control", "private, no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	cw := &countingWriter{w: w}
	rep, err := ws.Zip(r.Context(), cw, rel)
	if err != nil {
		if cw.n == 0 {
			h.Del("Content-Disposition")
			writeError(w, s.log, fileError(rel, err))
			return
		}
		if r.Context().Err() == nil {
			s.log.Error("zip cut short", "chat", chatID, "path", rel, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	s.log.Info("workspace zipped", "chat", chatID, "path", rel, "files", rep.Files, "bytes", rep.Bytes, "skipped", rep.Skipped)
}

// attachment is the Content-Disposition of a download saved as name. The
// name comes from folders the agent named: control characters become "_"
// and mime.FormatMediaType quotes the rest, or encodes it as RFC 6266's
// filename* (UTF-8, percent-encoded) when it is not plain ASCII, so no
// name can add a parameter or break the header.
func attachment(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '_'
		}
		return r
	}, name)
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}

// countingWriter counts what went through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
