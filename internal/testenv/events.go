package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentbox/agentbox/chat"
)

// ReadEvents reads a native SSE stream to its end and returns its events;
// a data line that is not an event ends it with an error, with the events
// read before it.
func ReadEvents(r io.Reader) ([]chat.Event, error) {
	var events []chat.Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e chat.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			return events, fmt.Errorf("bad event %q: %w", data, err)
		}
		events = append(events, e)
	}
	return events, sc.Err()
}
