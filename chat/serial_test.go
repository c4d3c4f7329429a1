package chat_test

import (
	"sync"
	"testing"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/chat/chattest"
)

func TestSerial(t *testing.T) {
	t.Parallel()
	var rec chattest.Recorder
	s := chat.NewSerial(rec.Emit)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Emit(chat.Event{Event: chat.Delta})
		}()
	}
	wg.Wait()
	s.Close()
	s.Emit(chat.Event{Event: chat.Delta})
	if n := len(rec.Events()); n != 8 {
		t.Errorf("%d events, want 8", n)
	}
	if !s.Closed() {
		t.Error("not closed after Close")
	}
	nilEmit := chat.NewSerial(nil)
	nilEmit.Emit(chat.Event{}) // dropped
	nilEmit.Close()
	nilEmit.Close() // idempotent
}

func TestSerialStopsAfterDone(t *testing.T) {
	t.Parallel()
	var rec chattest.Recorder
	s := chat.NewSerial(rec.Emit)
	s.Emit(chat.Event{Event: chat.Done, Final: &chat.Final{}})
	s.Emit(chat.Event{Event: chat.Start, ID: "late", Type: chat.TypeText})
	if got := rec.Types(chat.Start); len(got) != 0 || len(rec.Events()) != 1 || !s.Closed() {
		t.Errorf("events = %+v", rec.Events())
	}
}
