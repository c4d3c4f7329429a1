// Package chattest holds the test helpers for chat event streams: a
// Recorder to pass as the EmitFunc, and Check, the invariants every stream
// satisfies.
package chattest

import (
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
)

// Recorder records the events emitted to it. It is safe for concurrent use;
// the zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []chat.Event
}

// Emit records e. It has the chat.EmitFunc signature.
func (r *Recorder) Emit(e chat.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []chat.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]chat.Event(nil), r.events...)
}

// Last returns the last event recorded (the zero Event when none was).
func (r *Recorder) Last() chat.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return chat.Event{}
	}
	return r.events[len(r.events)-1]
}

// Starts returns the start events of messages of type typ, in order.
func (r *Recorder) Starts(typ string) []chat.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []chat.Event
	for _, e := range r.events {
		if e.Event == chat.Start && e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Types returns the type of every event of phase (chat.Start, ...), in
// order.
func (r *Recorder) Types(phase string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Event == phase {
			out = append(out, e.Type)
		}
	}
	return out
}

// Check verifies what every event stream must satisfy: each event keeps
// the contract (chat.Event.Check: an id and a type on every event but
// done); ids are unique per message; deltas and the end come between a
// message's start and its end, with the type the message has (a replace,
// of a started message, changes it);
// at most one done event comes last, when no message is open; a stream
// without done (an executor's) ends with every message ended.
func Check(t testing.TB, events []chat.Event) {
	t.Helper()
	type msg struct {
		typ  string
		open bool
	}
	msgs := map[string]*msg{}
	var order []string
	done := false
	for i, e := range events {
		if err := e.Check(); err != nil {
			t.Fatalf("event %d (%+v): %v", i, e, err)
		}
		if done {
			t.Fatalf("event %d (%+v) after done", i, e)
		}
		m := msgs[e.ID]
		switch e.Event {
		case chat.Start:
			if m != nil {
				t.Fatalf("event %d: id %s started twice", i, e.ID)
			}
			msgs[e.ID] = &msg{typ: e.Type, open: true}
			order = append(order, e.ID)
		case chat.Replace:
			if m == nil {
				t.Fatalf("event %d: replace of %s which was never started", i, e.ID)
			}
			m.typ = e.Type
		case chat.Merge, chat.Set, chat.Append:
			if m == nil {
				t.Fatalf("event %d: %s of %s which was never started", i, e.Event, e.ID)
			}
		case chat.BlockEnd:
			// A block's id, not a message's.
		case chat.Delta, chat.End:
			if m == nil || !m.open {
				t.Fatalf("event %d: %s for %s which is not open", i, e.Event, e.ID)
			}
			if e.Type != m.typ {
				t.Fatalf("event %d: %s of %s has type %q, the message has %q", i, e.Event, e.ID, e.Type, m.typ)
			}
			if e.Event == chat.End {
				m.open = false
			}
		case chat.Done:
			done = true
		}
	}
	for _, id := range order {
		if msgs[id].open {
			t.Errorf("message %s never ended", id)
		}
	}
}
