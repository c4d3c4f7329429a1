package chat_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/agentbox/agentbox/chat"
)

// The event stream of a message, as the server sends it and `agentbox run
// --json` prints it: every event carries the message's type.
func ExampleSSEFrame() {
	for _, e := range []chat.Event{
		{Event: chat.Start, ID: "m1", Type: chat.TypeText, Text: "Hel"},
		{Event: chat.Delta, ID: "m1", Type: chat.TypeText, Text: "lo"},
		{Event: chat.End, ID: "m1", Type: chat.TypeText},
	} {
		frame, err := chat.SSEFrame(e)
		if err != nil {
			fmt.Println(err)
			continue
		}
		os.Stdout.Write(frame)
	}
	_, err := chat.JSONLine(chat.Event{Event: chat.Delta, ID: "m1", Text: "!"})
	fmt.Println(err)
	// Output:
	// event: start
	// data: {"event":"start","id":"m1","type":"text","text":"Hel"}
	//
	// event: delta
	// data: {"event":"delta","id":"m1","type":"text","text":"lo"}
	//
	// event: end
	// data: {"event":"end","id":"m1","type":"text"}
	//
	// event not encoded: delta event of message "m1" has no type
}

// Options decode strictly where they enter, and merge field by field.
func ExampleDecodeOptions() {
	assistant, _ := chat.DecodeModelOptions("options", []byte(`{"temperature": 0.3, "max_tokens": 1024}`))
	hook, err := chat.DecodeOptions("options", []byte(`{"temperature": 0.9, "sandbox": {"arguments": {"max_turns": 5}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	turn := chat.Options{ModelOptions: assistant}.Merge(hook)
	fmt.Println(*turn.Temperature, *turn.MaxTokens, turn.SandboxArguments(chat.Arguments{}).MaxTurns)

	_, err = chat.DecodeOptions("options", []byte(`{"max_tokens": "lots"}`))
	fmt.Println(err)
	// Output:
	// 0.9 1024 5
	// options.max_tokens: want an integer, got a string
}

// A failure is made once, where it is understood, as a *chat.Error; what
// nobody classified becomes one in chat.AsError.
func ExampleAsError() {
	err := fmt.Errorf("turn: %w", chat.Errorf(chat.ErrRateLimit, "the model is rate limited: retry later"))
	fmt.Println(chat.AsError(err).Code)
	fmt.Println(chat.AsError(errors.New("disk full")).Message)
	// Output:
	// rate_limit
	// internal error
}
