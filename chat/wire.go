package chat

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbox/agentbox/internal/sse"
)

// The encodings of events on the wire. They are the only place events are
// turned into bytes: the server's event stream uses SSEFrame, `agentbox run
// --json` uses JSONLine, and both refuse an event that breaks the contract
// (Event.Check) rather than send a client something it cannot follow.

// MarshalEvent returns e as one JSON object:
// {"event":"delta","id":"m1","type":"text","text":"Hel"}.
func MarshalEvent(e Event) ([]byte, error) {
	if err := e.Check(); err != nil {
		return nil, fmt.Errorf("event not encoded: %w", err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("%s event of message %q not encoded: %w", e.Event, e.ID, err)
	}
	return b, nil
}

// JSONLine returns e as one line of JSON lines: the JSON object and "\n".
func JSONLine(e Event) ([]byte, error) {
	b, err := MarshalEvent(e)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// SSEFrame returns e as one server-sent event: "event: <phase>", "data:
// <the JSON object>" and the blank line that ends the frame.
func SSEFrame(e Event) ([]byte, error) { return SSEFrameID("", e) }

// SSEFrameID returns e as one server-sent event with an "id: <id>" line
// first (none when id is ""), which a client sends back as Last-Event-ID
// to resume the stream after it. id must not hold a line break or NUL.
func SSEFrameID(id string, e Event) ([]byte, error) {
	if strings.ContainsAny(id, "\r\n\x00") {
		return nil, fmt.Errorf("event id %q holds a line break or NUL", id)
	}
	b, err := MarshalEvent(e)
	if err != nil {
		return nil, err
	}
	return sse.Frame(sse.Event{ID: id, Type: e.Event, Data: b}), nil
}
