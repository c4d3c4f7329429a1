package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"

	"github.com/tidwall/gjson"

	"github.com/agentbox/agentbox/assistant"
	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/pipeline"
	"github.com/agentbox/agentbox/scripted"
)

// Example embeds agentbox without its server: load an app folder, build a
// pipeline, and run one turn of a direct assistant. The example app's "qa"
// assistant answers from a scripted connector (a model script), so this
// runs offline. Without Runtimes and Workspaces the pipeline serves direct
// assistants only; history lives in memory.
func Example() {
	app, err := assistant.Load("../examples/app")
	if err != nil {
		log.Fatal(err)
	}
	p, err := pipeline.New(pipeline.Config{
		App:    pipeline.Static{App: app},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	// Events stream as the answer comes; a Collector keeps its text, as a
	// client that does not stream would see it.
	var answer chat.Collector
	resp, err := p.Chat(context.Background(), &pipeline.Request{
		UserID:      "alice",
		ChatID:      "chat-1",
		AssistantID: "qa",
		Messages:    []chat.Message{{Role: chat.RoleUser, Content: "What is agentbox?"}},
	}, answer.Add)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(resp.Content)
	fmt.Println(answer.Text() == resp.Content)
	// Output:
	// agentbox turns a folder of assistant definitions into a streaming chat
	// API. Assistants with a sandbox block run a coding agent in a container
	// with a persistent workspace; the others, like me, answer directly.
	// true
}

// Example_scripted builds the app in Go, points its connector at a
// scripted model server on loopback (package scripted) and sends model
// options with the request: they reach the model as request fields.
func Example_scripted() {
	model := scripted.NewServer(&scripted.Script{Turns: []scripted.Turn{{Text: "Paris."}}})
	defer model.Close()
	app := &assistant.App{
		Config: &assistant.AppConfig{},
		Connectors: map[string]*assistant.Connector{
			"llm": {ID: "llm", Type: "openai", Options: assistant.ConnectorOptions{Host: model.URL, Key: "test-key", Model: "test-model"}},
		},
		Assistants: map[string]*assistant.Assistant{
			"qa": {ID: "qa", Name: "Q&A", Connector: "llm", Prompts: []chat.Message{{Role: chat.RoleSystem, Content: "Be brief."}}},
		},
	}
	p, err := pipeline.New(pipeline.Config{App: pipeline.Static{App: app}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(context.Background())

	temperature := 0.2
	resp, err := p.Chat(context.Background(), &pipeline.Request{
		UserID: "alice", ChatID: "chat-1", AssistantID: "qa",
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "Capital of France?"}},
		Options:  chat.ModelOptions{Temperature: &temperature},
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	body := gjson.ParseBytes(model.TurnRequests()[0].Body)
	fmt.Println(resp.Content)
	fmt.Println(body.Get("model"), body.Get("temperature"), body.Get("messages.0.content"))

	// A failed turn is a *chat.Error: a code for programs, a message for
	// people.
	_, err = p.Chat(context.Background(), &pipeline.Request{
		UserID: "alice", ChatID: "chat-1", AssistantID: "nope",
		Messages: []chat.Message{{Role: chat.RoleUser, Content: "hi"}},
	}, nil)
	var ce *chat.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.Code, errors.Is(err, pipeline.ErrUnknownAssistant))
	}
	// Output:
	// Paris.
	// test-model 0.2 Be brief.
	// invalid_request true
}
