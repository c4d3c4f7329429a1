package server

import (
	"errors"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/sandbox"
)

// fileListing is the JSON answer for a folder.
type fileListing struct {
	// Path is the folder, relative to the workspace ("." for its root).
	Path    string             `json:"path"`
	Entries []sandbox.FileInfo `json:"entries"`
}

// files is GET /api/chats/{chat}/files?path=P: a folder of the
// authenticated user's chat workspace as JSON (with format=zip: as a zip
// archive), or a file's raw content.
// Paths are relative to the workspace (or absolute under /workspace);
// anything resolving outside it, also through symlinks, is a 400.
func (s *Server) files(w http.ResponseWriter, r *http.Request, user string) {
	chatID := r.PathValue("chat")
	if err := validateID("chat", chatID); err != nil {
		writeError(w, s.log, badRequest("%v", err))
		return
	}
	p := r.URL.Query().Get("path")
	rel, err := sandbox.Rel(p)
	if err != nil {
		writeError(w, s.log, badRequest("path %q is outside the chat's workspace", p))
		return
	}
	format := r.URL.Query().Get("format")
	if format != "" && format != "zip" {
		writeError(w, s.log, badRequest("format %q is not supported: leave it out, or format=zip for a folder as a zip archive", format))
		return
	}
	ws, release, err := s.cfg.Backend.Workspace(r.Context(), user, chatID)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	if release != nil {
		defer release()
	}
	if format == "zip" {
		s.zipFolder(w, r, ws, chatID, rel)
		return
	}
	// A FIFO, socket or device the agent left is refused, never opened:
	// it must not hang the request.
	f, err := ws.Open(r.Context(), rel)
	if err != nil {
		writeError(w, s.log, fileError(p, err))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeError(w, s.log, fileError(p, err))
		return
	}
	switch {
	case st.IsDir():
		entries, err := ws.ListDir(r.Context(), rel)
		if err != nil {
			writeError(w, s.log, fileError(p, err))
			return
		}
		writeJSON(w, http.StatusOK, fileListing{Path: rel, Entries: entries})
	case st.Mode().IsRegular():
		ct := mime.TypeByExtension(path.Ext(rel))
		if ct == "" {
			ct = "application/octet-stream"
			if isText(f) {
				ct = "text/plain; charset=utf-8"
			}
		}
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("X-Content-Type-Options", "nosniff")
		// Agent-written HTML or SVG must not run as this API's origin.
		h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
		h.Set("Cache-Control", "private, no-cache")
		http.ServeContent(w, r, "", st.ModTime(), f)
	default:
		writeError(w, s.log, badRequest("path %q is not a regular file or folder", p))
	}
}

// isText sniffs the start of f (ReadAt leaves the offset alone).
func isText(f *os.File) bool {
	var buf [512]byte
	n, _ := f.ReadAt(buf[:], 0)
	return strings.HasPrefix(http.DetectContentType(buf[:n]), "text/")
}

// fileError maps a file operation's error to the HTTP error.
func fileError(p string, err error) error {
	var ce *chat.Error
	var he *httpError
	var sfe *sandbox.SpecialFileError
	switch {
	case errors.As(err, &he) || errors.As(err, &ce):
		return err
	case errors.As(err, &sfe):
		return badRequest("path %q is a %s, not a regular file or folder: only those can be read", p, sfe.Kind)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, sandbox.ErrNotFound):
		return notFound("no file or folder %q in the chat's workspace", p)
	case errors.Is(err, sandbox.ErrPathOutside), isEscape(err):
		return badRequest("path %q is outside the chat's workspace", p)
	case errors.Is(err, syscall.ENOTDIR):
		return notFound("no file or folder %q in the chat's workspace", p)
	case errors.Is(err, sandbox.ErrDiskFull):
		return errorf(http.StatusInsufficientStorage, chat.ErrInvalidRequest,
			"the chat's workspace is full (its disk limit, sandbox.max_disk): delete files first")
	case errors.Is(err, fs.ErrPermission):
		return errorf(http.StatusForbidden, chat.ErrInvalidRequest, "path %q is not readable", p)
	}
	return err
}

// isEscape reports os.Root's "path escapes from parent" error, which has
// no exported sentinel.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
