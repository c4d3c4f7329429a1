package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
)

// DefaultTerminalIdle is how long a terminal may go without input or
// output before the server closes it (Config.TerminalIdle).
const DefaultTerminalIdle = 15 * time.Minute

// TerminalProtocol is the WebSocket subprotocol of
// /api/chats/{chat}/terminal. Binary messages carry the terminal's bytes
// both ways; text messages are JSON control messages:
//
//	client: {"type": "resize", "rows": 40, "cols": 120}
//	server: {"type": "ready", "assistant_id": "coder", "runtime": "docker"}
//	        {"type": "exit", "code": 0}                  the shell ended
//	        {"type": "closed", "reason": "idle"}         idle, chat deleted, shutdown
//	        {"type": "error", "code": "...", "message": "..."}
//
// The socket closes after exit, closed or error; the sandbox is removed
// when it does.
const TerminalProtocol = "agentbox.terminal.v1"

// terminalMessage is a control message of TerminalProtocol.
type terminalMessage struct {
	Type        string `json:"type"`
	Rows        uint16 `json:"rows,omitempty"`
	Cols        uint16 `json:"cols,omitempty"`
	Code        *int   `json:"code,omitempty"`
	ErrCode     string `json:"error_code,omitempty"`
	Message     string `json:"message,omitempty"`
	Reason      string `json:"reason,omitempty"`
	AssistantID string `json:"assistant_id,omitempty"`
	Runtime     string `json:"runtime,omitempty"`
}

// sizeParam reads an optional terminal dimension from the query.
func sizeParam(r *http.Request, name string) (uint16, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, badRequest("%s=%q: want a number of 1 to 1000", name, v)
	}
	return uint16(n), nil
}

// terminal is GET /api/chats/{chat}/terminal, a WebSocket (TerminalProtocol)
// to an interactive shell in a new sandbox of the user's chat, made like
// its assistant's (?assistant= names another of the app's sandboxed
// assistants). It ends when the shell exits, the socket closes, nothing
// moves for Config.TerminalIdle, the chat is deleted or the server shuts
// down; the sandbox is then removed.
func (s *Server) terminal(w http.ResponseWriter, r *http.Request, user string) {
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
	rows, err := sizeParam(r, "rows")
	if err == nil {
		var cols uint16
		cols, err = sizeParam(r, "cols")
		if err == nil {
			err = s.serveTerminal(w, r, cs, pipeline.TerminalRequest{
				UserID: user, ChatID: chatID, AssistantID: r.URL.Query().Get("assistant"), Rows: rows, Cols: cols,
			})
		}
	}
	if err != nil {
		writeError(w, s.log, err)
	}
}

// serveTerminal upgrades the connection and runs the terminal. It
// returns an error only while the answer can still be an HTTP one.
func (s *Server) serveTerminal(w http.ResponseWriter, r *http.Request, cs Chats, req pipeline.TerminalRequest) error {
	if !isWebSocket(r) {
		return errorf(http.StatusUpgradeRequired, chat.ErrInvalidRequest,
			"this is a WebSocket endpoint: connect with the %s subprotocol", TerminalProtocol)
	}
	// The guard let only the server's own pages and allowed origins
	// through; the library checks Origin once more against the same.
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{TerminalProtocol}, OriginPatterns: s.guard.wsPatterns})
	if err != nil {
		return nil // Accept answered the client itself
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sendJSON := func(m terminalMessage) error {
		b, _ := json.Marshal(m)
		wctx, c := context.WithTimeout(ctx, 10*time.Second)
		defer c()
		return conn.Write(wctx, websocket.MessageText, b)
	}

	term, err := cs.OpenTerminal(ctx, req)
	if err != nil {
		e := asAPIError(err)
		if e.Status >= 500 {
			s.log.Error("terminal not opened", "user", req.UserID, "chat", req.ChatID, "err", err)
		}
		_ = sendJSON(terminalMessage{Type: "error", ErrCode: e.Err.Code, Message: e.Err.Message})
		conn.Close(websocket.StatusPolicyViolation, "terminal not opened")
		return nil
	}
	defer term.Close()
	if err := sendJSON(terminalMessage{Type: "ready", AssistantID: term.AssistantID, Runtime: term.Runtime}); err != nil {
		return nil
	}

	var activity sync.Mutex
	last := time.Now()
	touch := func() { activity.Lock(); last = time.Now(); activity.Unlock() }
	idleFor := func() time.Duration { activity.Lock(); defer activity.Unlock(); return time.Since(last) }

	var wg sync.WaitGroup
	outDone := make(chan struct{})
	wg.Add(2)
	go func() { // the terminal's output
		defer wg.Done()
		defer close(outDone)
		buf := make([]byte, 32<<10)
		for {
			n, err := term.Read(buf)
			if n > 0 {
				touch()
				if werr := conn.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
					cancel()
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // the client's input and control messages
		defer wg.Done()
		defer cancel()
		for {
			typ, b, err := conn.Read(ctx)
			if err != nil {
				return
			}
			touch()
			if typ == websocket.MessageBinary {
				if _, err := term.Write(b); err != nil {
					return
				}
				continue
			}
			var m terminalMessage
			if err := json.Unmarshal(b, &m); err != nil || m.Type != "resize" {
				_ = sendJSON(terminalMessage{Type: "error", ErrCode: chat.ErrInvalidRequest,
					Message: fmt.Sprintf("unknown control message %.100q: send {\"type\": \"resize\", \"rows\": R, \"cols\": C}", b)})
				continue
			}
			if err := term.Resize(ctx, m.Rows, m.Cols); err != nil {
				_ = sendJSON(terminalMessage{Type: "error", ErrCode: chat.ErrInvalidRequest, Message: err.Error()})
			}
		}
	}()

	exited := make(chan int, 1)
	go func() {
		code, err := term.Wait(ctx)
		if err == nil {
			exited <- code
		}
	}()
	idle := s.cfg.TerminalIdle
	tick := time.NewTicker(min(idle/4, 30*time.Second))
	defer tick.Stop()
	closeWith := func(m terminalMessage, code websocket.StatusCode) {
		_ = sendJSON(m)
		conn.Close(code, m.Reason)
	}
	for {
		select {
		case code := <-exited:
			// What the shell printed last goes out before its exit status.
			select {
			case <-outDone:
			case <-time.After(2 * time.Second):
			}
			closeWith(terminalMessage{Type: "exit", Code: &code, Reason: "exited"}, websocket.StatusNormalClosure)
		case <-ctx.Done():
			// The client went away or the socket failed.
		case <-term.Done():
			closeWith(terminalMessage{Type: "closed", Reason: "the chat was deleted or the server closed it"}, websocket.StatusGoingAway)
		case <-s.closing:
			closeWith(terminalMessage{Type: "closed", Reason: "the server is shutting down"}, websocket.StatusGoingAway)
		case <-tick.C:
			if idleFor() < idle {
				continue
			}
			closeWith(terminalMessage{Type: "closed", Reason: "idle for " + idle.String()}, websocket.StatusNormalClosure)
		}
		break
	}
	cancel()
	if err := term.Close(); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("terminal close", "user", req.UserID, "chat", req.ChatID, "err", err)
	}
	wg.Wait()
	return nil
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}
