package connector

import (
	"context"
	"fmt"

	"github.com/agentbox/agentbox/chat"
	"github.com/agentbox/agentbox/scripted"
)

// scriptedClient answers from a script (package scripted): each Stream
// call starts a fresh scripted model server on 127.0.0.1 (so every request
// replays the script from its start), talks to it with the Anthropic
// client, and closes it. Retries within one call go to the same server and
// take the script's next turn, so a script can rehearse error handling (a
// 529 turn, then an answer).
type scriptedClient struct {
	cfg    Config
	script *scripted.Script
}

func newScripted(cfg Config) (Client, error) {
	if cfg.Script == "" {
		return nil, fmt.Errorf("scripted connector: no script file; set the connector's script option to a model script (YAML or JSON)")
	}
	s, err := scripted.LoadScript(cfg.Script)
	if err != nil {
		return nil, fmt.Errorf("scripted connector: %w", err)
	}
	if cfg.Model == "" {
		cfg.Model = scripted.Model
	}
	return &scriptedClient{cfg: cfg, script: s}, nil
}

func (s *scriptedClient) Type() string  { return TypeScripted }
func (s *scriptedClient) Model() string { return s.cfg.Model }

// Stream implements Client.
func (s *scriptedClient) Stream(ctx context.Context, req *Request, emit chat.EmitFunc) (*Response, error) {
	srv, err := startServer(s.script)
	if err != nil {
		return nil, fail(chat.ErrNetwork, "scripted connector: "+err.Error(), &Failure{Err: err})
	}
	defer srv.Close()
	cfg := s.cfg
	cfg.Type, cfg.Host = TypeAnthropic, srv.URL
	if cfg.Key == "" {
		cfg.Key = "sk-llmtest"
	}
	u, err := endpoint(TypeScripted, srv.URL, srv.URL, "/messages")
	if err != nil {
		return nil, fail(chat.ErrInvalidRequest, err.Error(), &Failure{Err: err})
	}
	c := newClient(TypeScripted, cfg, u, &anthropic{cfg: cfg})
	return c.Stream(ctx, req, emit)
}

// StartScripted loads the script at path and starts a scripted
// model server for it on 127.0.0.1, for a sandboxed CLI to use
// (ANTHROPIC_BASE_URL=srv.URL). The caller closes the server.
func StartScripted(path string) (*scripted.Server, error) {
	s, err := scripted.LoadScript(path)
	if err != nil {
		return nil, fmt.Errorf("scripted connector: %w", err)
	}
	return startServer(s)
}

// startServer starts a scripted model server, turning its panics (no free port)
// into errors.
func startServer(s *scripted.Script) (srv *scripted.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("start scripted model server: %v", r)
		}
	}()
	return scripted.NewServer(s), nil
}
