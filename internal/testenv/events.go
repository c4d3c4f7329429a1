package testenv

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/internal/sse"
)

// ReadEvents reads a native SSE stream to its end and returns its events;
// a data line that is not an event ends it with an error, with the events
// read before it.
func ReadEvents(r io.Reader) ([]chat.Event, error) {
	var events []chat.Event
	rd := sse.NewReader(r, 64<<20)
	for {
		f, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		var e chat.Event
		if err := json.Unmarshal(f.Data, &e); err != nil {
			return events, fmt.Errorf("bad event %q: %w", f.Data, err)
		}
		events = append(events, e)
	}
}
