package store

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/agentbox/agentbox/chat"
)

func TestHistoryKeepsToolCalls(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
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

func TestResponses(t *testing.T) {
	t.Parallel()
	s := openTest(t)
	ctx := context.Background()
	t0 := time.UnixMilli(time.Now().UnixMilli())
	for i, r := range []Response{
		{ID: "resp_1", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_1"}`), Created: t0},
		{ID: "resp_2", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_2"}`), Created: t0.Add(time.Millisecond)},
		{ID: "resp_0", ChatID: "c", AssistantID: "qa", Body: []byte(`{"id":"resp_0"}`), Created: t0.Add(time.Millisecond)},
		{ID: "resp_3", ChatID: "d", AssistantID: "qa", Body: []byte(`{"id":"resp_3"}`), Created: t0},
	} {
		if err := s.SaveResponse(ctx, "alice", r); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
	}
	if err := s.SaveResponse(ctx, "alice", Response{ID: "resp_1", ChatID: "c", Body: []byte("{}"), Created: t0}); err == nil {
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
}
