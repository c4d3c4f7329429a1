package chat_test

import (
	"strings"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestEventCheck(t *testing.T) {
	t.Parallel()
	ok := []chat.Event{
		{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Hel"},
		{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "lo"},
		{Event: chat.Replace, ID: "m1", Type: "progress", Text: "50%"},
		{Event: chat.End, ID: "m1", Type: "progress"},
		{Event: chat.Done, Final: &chat.Final{}},
	}
	for _, e := range ok {
		if err := e.Check(); err != nil {
			t.Errorf("%+v: %v", e, err)
		}
	}
	chattest.Check(t, ok)
	bad := []struct {
		e    chat.Event
		want string
	}{
		{chat.Event{Event: chat.Delta, ID: "m1", Text: "x"}, `delta event of message "m1" has no type`},
		{chat.Event{Event: chat.End, ID: "m1"}, `end event of message "m1" has no type`},
		{chat.Event{Event: chat.Start, Type: chat.TypeText}, "start event has no id"},
		{chat.Event{Event: chat.Start, ID: "m1", Type: "a\nevent: done"}, "line break"},
		{chat.Event{Event: chat.Done}, "no final payload"},
		{chat.Event{}, "no phase"},
		{chat.Event{Event: "start\ndata: x", ID: "m1", Type: "text"}, "unknown event phase"},
	}
	for _, tc := range bad {
		err := tc.e.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.e, err, tc.want)
		}
		if _, err := chat.SSEFrame(tc.e); err == nil {
			t.Errorf("%+v was encoded", tc.e)
		}
	}
}

func TestWire(t *testing.T) {
	t.Parallel()
	e := chat.Event{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "Hel"}
	line, err := chat.JSONLine(e)
	if err != nil || string(line) != `{"event":"delta","id":"m1","type":"text","text":"Hel"}`+"\n" {
		t.Errorf("JSONLine = %q, %v", line, err)
	}
	frame, err := chat.SSEFrame(e)
	if err != nil || string(frame) != "event: delta\ndata: {\"event\":\"delta\",\"id\":\"m1\",\"type\":\"text\",\"text\":\"Hel\"}\n\n" {
		t.Errorf("SSEFrame = %q, %v", frame, err)
	}
	frame, err = chat.SSEFrameID("r-1.7", e)
	if err != nil || string(frame) != "id: r-1.7\nevent: delta\ndata: {\"event\":\"delta\",\"id\":\"m1\",\"type\":\"text\",\"text\":\"Hel\"}\n\n" {
		t.Errorf("SSEFrameID = %q, %v", frame, err)
	}
	if _, err := chat.SSEFrameID("a\nevent: done", e); err == nil {
		t.Error("an id with a line break was encoded")
	}
	if _, err := chat.MarshalEvent(chat.Event{Event: chat.Start, ID: "m1", Type: "x", Props: map[string]any{"c": make(chan int)}}); err == nil {
		t.Error("props that are not JSON were encoded")
	}
}

func TestCollector(t *testing.T) {
	t.Parallel()
	var c chat.Collector
	for _, e := range []chat.Event{
		{Event: chat.Start, ID: "t1", Type: chat.TypeThinking, Text: "hmm"},
		{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Hel"},
		{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "lo"},
		{Event: chat.Delta, ID: "t1", Type: chat.TypeThinking, Text: "..."},
		{Event: chat.End, ID: "m1", Type: chat.TypeText},
	} {
		c.Add(e)
	}
	if c.Text() != "Hello" {
		t.Errorf("text = %q", c.Text())
	}
}
