package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a host function the agent in the sandbox may call over MCP.
//
// Assistants declare JS tools in package.yao ("tools": [{"name",
// "function", "description", "parameters", "timeout"}]); the pipeline turns
// each into a Tool whose Handler calls the hook function. Embedders register
// Go tools directly.
type Tool struct {
	// Name is the MCP tool name: 1-48 of [A-Za-z0-9_-] (the agent sees
	// mcp__agentbox__NAME, and model APIs cap tool names at 64 bytes).
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// InputSchema is the JSON schema (draft 2020-12) of the arguments; its
	// type must be "object". Nil means "no arguments" ({"type":"object"}).
	// Arguments are validated against it (and its defaults applied) before
	// Handler runs; invalid arguments are a tool error the model can fix.
	InputSchema json.RawMessage
	// Timeout bounds one call (0 = Options.ToolTimeout). The request's
	// deadline bounds it too.
	Timeout time.Duration
	// Handler runs the tool on the host with the validated arguments (a JSON
	// object). ctx carries the call's deadline and CallFrom(ctx). The result
	// is sent to the model as text: a string as it is, json.RawMessage and
	// []byte verbatim, anything else JSON-encoded. An error becomes a tool
	// error result (isError) with the error's message. Handlers may run
	// concurrently.
	Handler func(ctx context.Context, args json.RawMessage) (any, error)
}

// CallInfo identifies a host tool call; handlers get it with CallFrom.
type CallInfo struct {
	Tool   string
	UserID string
	ChatID string
}

type callInfoKey struct{}

// CallFrom returns the call a tool handler's ctx belongs to.
func CallFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}

// MaxToolResult caps the text of one tool result sent back to the model;
// longer results are cut with a note saying so.
const MaxToolResult = 256 << 10

// maxToolConns bounds concurrent MCP connections to one session (the CLI
// opens one).
const maxToolConns = 8

var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,48}$`)

// compiledTool is a Tool with its schema resolved.
type compiledTool struct {
	Tool
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
}

// compileTools checks every tool and resolves its schema, so a bad
// definition is an error at Start rather than a panic or a surprise later.
func compileTools(tools []Tool) ([]*compiledTool, error) {
	seen := map[string]bool{}
	out := make([]*compiledTool, 0, len(tools))
	for i, t := range tools {
		if !toolNameRE.MatchString(t.Name) {
			return nil, fmt.Errorf("tool %d: invalid name %q: use 1-48 letters, digits, '_' or '-'", i, t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("tool %q: declared twice", t.Name)
		}
		seen[t.Name] = true
		if t.Handler == nil {
			return nil, fmt.Errorf("tool %q: no handler", t.Name)
		}
		if t.Timeout < 0 {
			return nil, fmt.Errorf("tool %q: negative timeout %s", t.Name, t.Timeout)
		}
		raw := t.InputSchema
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage(`{"type":"object"}`)
		}
		var sch jsonschema.Schema
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&sch); err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
		if sch.Type != "object" {
			return nil, fmt.Errorf(`tool %q: input schema must have "type": "object" (got %q)`, t.Name, sch.Type)
		}
		res, err := sch.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			return nil, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
		}
		out = append(out, &compiledTool{Tool: t, schema: &sch, resolved: res})
	}
	return out, nil
}

// toolServer serves the session's tools over MCP on the tools socket.
type toolServer struct {
	s      *Session
	ln     net.Listener
	server *mcp.Server

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	handlers sync.WaitGroup
}

func newToolServer(s *Session, tools []*compiledTool, ln net.Listener) *toolServer {
	ts := &toolServer{s: s, ln: ln, conns: map[net.Conn]struct{}{}}
	ts.server = mcp.NewServer(&mcp.Implementation{Name: "agentbox-host-tools", Version: "1"}, &mcp.ServerOptions{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	for _, t := range tools {
		ts.server.AddTool(&mcp.Tool{
			Name:        t.Name,
			Description: t.Description,
			InputSchema: t.schema,
		}, ts.handler(t))
	}
	return ts
}

// serve accepts MCP connections until the listener closes.
func (ts *toolServer) serve() {
	for {
		c, err := ts.ln.Accept()
		if err != nil {
			return
		}
		ts.mu.Lock()
		if ts.closed || len(ts.conns) >= maxToolConns {
			ts.mu.Unlock()
			ts.s.log.Warn("bridge tools: connection refused", "reason", "closed or too many connections")
			c.Close()
			continue
		}
		ts.conns[c] = struct{}{}
		ts.mu.Unlock()
		ts.s.wg.Go(func() { ts.serveConn(c) })
	}
}

func (ts *toolServer) serveConn(c net.Conn) {
	defer func() {
		ts.mu.Lock()
		delete(ts.conns, c)
		ts.mu.Unlock()
		c.Close()
	}()
	ss, err := ts.server.Connect(ts.s.ctx, &mcp.IOTransport{Reader: c, Writer: c}, nil)
	if err != nil {
		ts.s.log.Warn("bridge tools: connect", "err", err)
		return
	}
	stop := context.AfterFunc(ts.s.ctx, func() { ss.Close() })
	defer stop()
	_ = ss.Wait()
}

// close stops accepting, closes every connection and waits for running
// handlers' results to be abandoned (their contexts are already canceled).
func (ts *toolServer) close() error {
	ts.mu.Lock()
	ts.closed = true
	for c := range ts.conns {
		c.Close()
	}
	ts.mu.Unlock()
	if err := ts.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge tools close: %w", err)
	}
	return nil
}

// handler adapts a Tool to the SDK: it validates the arguments, applies the
// timeout, runs the handler and turns its outcome into a tool result. Every
// failure the model could react to is a tool error (isError), never a
// protocol error.
func (ts *toolServer) handler(t *compiledTool) mcp.ToolHandler {
	timeout := t.Timeout
	if timeout <= 0 {
		timeout = ts.s.opts.ToolTimeout
	}
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		args, err := validateArgs(t, req.Params.Arguments)
		if err != nil {
			ts.s.log.Info("bridge tool call", "tool", t.Name, "outcome", "invalid arguments")
			return toolError(err), nil
		}
		// The call ends with the MCP request (client cancel, connection
		// gone), the session (Close, request deadline) or its own timeout.
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		turn := ts.s.active()
		stop := context.AfterFunc(turn, cancel)
		defer stop()
		ctx = context.WithValue(ctx, callInfoKey{}, CallInfo{Tool: t.Name, UserID: ts.s.opts.UserID, ChatID: ts.s.opts.ChatID})

		type outcome struct {
			v   any
			err error
		}
		done := make(chan outcome, 1)
		ts.handlers.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					ts.s.log.Error("bridge tool panic", "tool", t.Name, "panic", r, "stack", string(debug.Stack()))
					done <- outcome{err: fmt.Errorf("tool %s: internal error", t.Name)}
				}
			}()
			v, err := t.Handler(ctx, args)
			done <- outcome{v, err}
		})
		var res *mcp.CallToolResult
		select {
		case o := <-done:
			if o.err != nil {
				res = toolError(o.err)
			} else {
				res = toolResult(o.v)
			}
		case <-ctx.Done():
			// A handler that ignores ctx must not hold the agent: answer now,
			// the handler's late result is dropped.
			switch {
			case turn.Err() != nil:
				res = toolError(fmt.Errorf("tool %s: the request has ended", t.Name))
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				res = toolError(fmt.Errorf("tool %s: timed out after %s", t.Name, timeout))
			default:
				res = toolError(fmt.Errorf("tool %s: canceled", t.Name))
			}
		}
		ts.s.log.Info("bridge tool call", "tool", t.Name, "is_error", res.IsError, "duration", time.Since(start))
		return res, nil
	}
}

// validateArgs checks raw arguments against the tool's schema, applies its
// defaults and returns the arguments as a JSON object.
func validateArgs(t *compiledTool, raw json.RawMessage) (json.RawMessage, error) {
	v := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var anyv any
		if err := d.Decode(&anyv); err != nil {
			return nil, fmt.Errorf("invalid arguments for %s: %w", t.Name, err)
		}
		m, ok := anyv.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("invalid arguments for %s: want a JSON object", t.Name)
		}
		v = m
	}
	// jsonschema-go validates float64 numbers, not json.Number.
	norm := normalizeNumbers(v).(map[string]any)
	if err := t.resolved.ApplyDefaults(&norm); err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %w", t.Name, err)
	}
	if err := t.resolved.Validate(norm); err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %w", t.Name, err)
	}
	out, err := json.Marshal(norm)
	if err != nil {
		return nil, fmt.Errorf("invalid arguments for %s: %w", t.Name, err)
	}
	return out, nil
}

// normalizeNumbers turns json.Number into float64 (integers that fit stay
// exact up to 2^53, as JSON Schema validators assume).
func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
		return x
	}
	return v
}

// toolError is a tool error result the model sees.
func toolError(err error) *mcp.CallToolResult {
	r := &mcp.CallToolResult{}
	r.SetError(err)
	return r
}

// toolResult renders a handler's value as the result text.
func toolResult(v any) *mcp.CallToolResult {
	var text string
	switch x := v.(type) {
	case nil:
		text = ""
	case string:
		text = x
	case json.RawMessage:
		text = string(x)
	case []byte:
		text = string(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return toolError(fmt.Errorf("encode tool result: %w", err))
		}
		text = string(b)
	}
	if len(text) > MaxToolResult {
		text = strings.ToValidUTF8(text[:MaxToolResult], "") + fmt.Sprintf("\n[agentbox: result truncated from %d to %d bytes]", len(text), MaxToolResult)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
