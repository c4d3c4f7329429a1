package bridge

import (
	"context"
	"time"
)

// BeginTurn bounds the session's model requests and tool calls by one
// turn of a sandbox kept between turns: they end when ctx ends, at
// deadline (zero: none) or when end is called, whichever is first, and
// until the next BeginTurn every new one is refused. The turn's model
// calls are counted afresh (Limits.Calls). The session itself (its
// sockets, the sandbox's connections) stays.
func (s *Session) BeginTurn(ctx context.Context, deadline time.Time) (end func()) {
	tctx, cancel := context.WithCancel(s.ctx)
	if !deadline.IsZero() {
		tctx, cancel = withDeadlineCancel(tctx, cancel, deadline)
	}
	stop := context.AfterFunc(ctx, cancel)
	if s.model != nil {
		s.model.calls.Store(newTurnCalls())
	}
	s.turn.Store(&tctx)
	return func() {
		stop()
		cancel()
	}
}

// active is the context the session's requests run in: the turn's
// (BeginTurn) or the session's.
func (s *Session) active() context.Context {
	if t := s.turn.Load(); t != nil {
		return *t
	}
	return s.ctx
}
