package server

import (
	"net/http"
	"strconv"

	"github.com/agentbox/agentbox/chat"
)

// follow streams the frames of rn after seq to the client, as they come,
// until the turn's done event was sent, the run is over or the client
// goes away; it reports whether it ended with the done event sent. The
// response ends with the done event: the sandbox's removal that follows
// is the server's, not the client's to wait for. With holdBack (a new
// turn's own request), error and done events that come before anything
// else are held back: if the turn then fails, the client gets a plain HTTP
// error with the right status instead of a 200 stream.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, rn *run, seq int, holdBack bool) (answered bool) {
	st := newSSEStream(w, s.cfg.Heartbeat, nil)
	defer st.Close()
	var pending [][]byte
	send := func(b []byte) {
		for _, p := range pending {
			_ = st.Write(p)
		}
		pending = nil
		_ = st.Write(b)
	}
	first := true
	for {
		frames, from, dropped, done, wake := rn.since(seq)
		if first && dropped {
			// The oldest events of a long turn no longer fit the buffer.
			msg := "earlier events of this turn are no longer kept"
			notice := chat.Event{Event: chat.Start, ID: "notice-dropped", Type: chat.TypeNotice, Text: msg,
				Props: map[string]any{"code": "events_dropped", "message": msg}}
			for _, e := range []chat.Event{notice, {Event: chat.End, ID: notice.ID, Type: chat.TypeNotice}} {
				if b, err := chat.SSEFrameID(rn.id+"."+strconv.Itoa(from), e); err == nil {
					send(b)
				}
			}
		}
		first = false
		for _, f := range frames {
			seq = f.seq
			if holdBack && f.final && !st.Committed() {
				pending = append(pending, f.data)
				continue
			}
			send(f.data)
			answered = answered || f.done
		}
		if done || answered {
			break
		}
		select {
		case <-wake:
		case <-r.Context().Done():
			return false
		}
	}
	st.StopHeartbeat()
	if err := rn.result(); err != nil && holdBack && !st.Committed() {
		writeError(w, s.log, renameParam(err, nativeParam))
		return answered
	}
	for _, p := range pending {
		_ = st.Write(p)
	}
	if !st.Committed() {
		_ = st.Commit()
	}
	return answered
}
