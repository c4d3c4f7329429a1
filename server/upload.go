package server

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// DefaultUploadLimit bounds one uploaded file (Config.UploadLimit).
const DefaultUploadLimit = 64 << 20

// uploadReadTimeout bounds how long a client may take to send a file.
const uploadReadTimeout = 5 * time.Minute

// uploaded is the answer to an upload: the file as the workspace has it.
type uploaded struct {
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	Created bool      `json:"created"`
}

// upload is PUT /api/chats/{chat}/files?path=P: the request body becomes
// the file P of the chat's workspace (created with its folders, or
// replaced), written atomically through the workspace's confined file
// operations: a path that leaves the workspace, also through a symlink,
// is a 400, a folder at P a 409, a body over the limit a 413.
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
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, s.log, chat.Errorf(CodeBodyTooLarge, "the file is over the upload limit of %d bytes", limit))
			return
		}
		writeError(w, s.log, badRequest("read the file: %v", err))
		return
	}
	ws, release, err := cs.OpenWorkspace(r.Context(), user, chatID)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	defer release()
	created := true
	if st, err := ws.Stat(r.Context(), rel); err == nil {
		if st.IsDir {
			writeError(w, s.log, errorf(http.StatusConflict, chat.ErrInvalidRequest, "path %q is a folder of the workspace", p))
			return
		}
		created = false
	}
	if err := ws.WriteFile(r.Context(), rel, data, 0o644); err != nil {
		writeError(w, s.log, fileError(p, err))
		return
	}
	st, err := ws.Stat(r.Context(), rel)
	if err != nil {
		writeError(w, s.log, fileError(p, err))
		return
	}
	s.log.Info("file uploaded", "user", user, "chat", chatID, "path", rel, "bytes", len(data))
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, uploaded{Path: rel, Size: st.Size, ModTime: st.ModTime, Created: created})
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
