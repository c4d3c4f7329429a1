package chat

import "sync"

// Serial passes events from any number of goroutines on to one EmitFunc, one
// at a time and in the order of the calls, and stops passing them once the
// stream is over: after a done event, or after Close. It is how every layer
// that has events from several goroutines (a turn's executor and hooks, a
// CLI's parser and its run, the server's stream) makes its EmitFunc safe.
type Serial struct {
	mu     sync.Mutex
	emit   EmitFunc
	closed bool
}

// NewSerial returns a Serial that passes events to emit (nil drops them).
func NewSerial(emit EmitFunc) *Serial { return &Serial{emit: emit} }

// Emit passes e on, unless the stream is over. It has the EmitFunc
// signature and is safe for concurrent use; emit runs with the Serial's
// lock held, so it sees events one at a time.
func (s *Serial) Emit(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if e.Event == Done {
		s.closed = true
	}
	if s.emit != nil {
		s.emit(e)
	}
}

// Close ends the stream: later events are dropped. When it returns, no call
// to emit is running. It is idempotent.
func (s *Serial) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Closed reports whether the stream is over.
func (s *Serial) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
