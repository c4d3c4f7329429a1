package storetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/store"
)

// testHistoryKeepsToolCalls: an assistant message's tool calls come back
// as they were stored.
func testHistoryKeepsToolCalls(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := bg
	msgs := []chat.Message{
		{Role: "user", Content: "weather?"},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "get_weather", Input: chat.RawJSON(`{"city":"Paris"}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: "18C"},
		{Role: "assistant", Content: "It is 18C."},
	}
	if err := s.ReplaceHistory(ctx, "alice", "c", "qa", msgs); err != nil {
		t.Fatal(err)
	}
	got, err := s.History(ctx, "alice", "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, msgs) {
		t.Errorf("history = %+v, want %+v", got, msgs)
	}
}

// testResponses: the Responses API's stored responses, per user, the
// chat's newest, and their removal with their chat.
func testResponses(t *testing.T, o Opener) {
	s := o.Open(t)
	ctx := bg
	t0 := time.UnixMilli(time.Now().UnixMilli())
	for i, r := range []store.Response{
		{ID: "resp_1", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_1"}`), Created: t0},
		{ID: "resp_2", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_2"}`), Created: t0.Add(time.Millisecond)},
		{ID: "resp_0", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_0"}`), Created: t0.Add(time.Millisecond)},
		{ID: "resp_3", ChatID: "d", AssistantID: "qa", Body: []byte(`{"id":"resp_3"}`), Created: t0},
	} {
		if err := s.SaveResponse(ctx, "alice", r); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	if err := s.SaveResponse(ctx, "alice", store.Response{ID: "resp_1", ChatID: "c", Body: []byte("{}"), Created: t0}); err == nil {
		t.Error("an id saved twice")
	}
	r, found, err := s.Response(ctx, "alice", "resp_2")
	if err != nil || !found || r.ChatID != "c" || r.AssistantID != "qa" || string(r.Body) != `{"id":"resp_2"}` || !r.Created.Equal(t0.Add(time.Millisecond)) {
		t.Errorf("Response = %+v, %v, %v", r, found, err)
	}
	if _, found, err := s.Response(ctx, "bob", "resp_2"); found || err != nil {
		t.Errorf("bob found alice's response: %v %v", found, err)
	}
	if id, err := s.LatestResponse(ctx, "alice", "c"); id != "resp_0" || err != nil { // stored last, whatever its id and time
		t.Errorf("LatestResponse = %q, %v", id, err)
	}
	if id, err := s.LatestResponse(ctx, "alice", "none"); id != "" || err != nil {
		t.Errorf("LatestResponse of a chat without responses = %q, %v", id, err)
	}
	if err := s.DeleteChat(ctx, "alice", "c"); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Response(ctx, "alice", "resp_1"); found {
		t.Error("a deleted chat's response is still found")
	}
	if _, found, _ := s.Response(ctx, "alice", "resp_3"); !found {
		t.Error("another chat's response went with the deleted chat")
	}
	// A body is kept byte for byte, up to the message limit; an id no
	// response can have is simply not found.
	odd := store.Response{ID: "resp_odd", ChatID: "c", Body: []byte("{\"x\":\"\x00\xff é\"}" + strings.Repeat(" ", 1<<20)), Created: t0}
	if err := s.SaveResponse(ctx, "alice", odd); err != nil {
		t.Fatal(err)
	}
	if r, found, err := s.Response(ctx, "alice", "resp_odd"); err != nil || !found || string(r.Body) != string(odd.Body) {
		t.Errorf("odd body came back as %d bytes, %v, %v", len(r.Body), found, err)
	}
	if _, found, err := s.Response(ctx, "alice", "bad\x00id\xff"); found || err != nil {
		t.Errorf("Response(an impossible id) = %v, %v", found, err)
	}
	if err := s.SaveResponse(ctx, "alice", store.Response{ID: "resp_x", ChatID: "c", AssistantID: "a\x00", Body: []byte("{}")}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a NUL in the assistant id: %v", err)
	}
	if err := s.SaveResponse(ctx, "alice", store.Response{ID: "resp_y", ChatID: "c", Body: make([]byte, store.MaxMessageBytes+1)}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a body past the limit: %v", err)
	}
}
