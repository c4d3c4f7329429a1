package server

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentbox/agentbox/preview"
)

// previews sends the requests for preview hosts to the preview handler,
// and only those: a preview host never reaches the API, whose guard
// refuses the names it does not answer to.
func (s *Server) previews(next http.Handler) http.Handler {
	pv := s.cfg.Previews
	if pv == nil {
		return next
	}
	h := pv.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pv.Owns(r.Host) {
			// A preview's connection (a WebSocket may stay open for
			// hours) ends when a shutdown starts, as its sandbox is about
			// to: a drain waits for turns, not for previews.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			go func() {
				select {
				case <-s.closing:
					cancel()
				case <-ctx.Done():
				}
			}()
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// chatPorts is GET /api/chats/{chat}/ports: the ports the chat's live
// sandbox declares, whether each listens, and a preview URL with a fresh
// ticket for each (empty while the chat has no live sandbox).
func (s *Server) chatPorts(w http.ResponseWriter, r *http.Request, user string) {
	id, err := chatParam(r)
	if err != nil {
		writeError(w, s.log, err)
		return
	}
	list := []preview.Status{}
	if s.cfg.Previews != nil {
		base := &url.URL{Scheme: "http", Host: r.Host}
		if r.TLS != nil {
			base.Scheme = "https"
		}
		list = s.cfg.Previews.List(user, id, base)
	}
	writeJSON(w, http.StatusOK, listResponse[preview.Status]{Object: "list", Data: list})
}
